"""The simulated inference engine (work in progress: see issue #3). Clock-agnostic core."""
