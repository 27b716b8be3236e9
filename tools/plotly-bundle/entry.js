'use strict';
// plotly.js's core (scatter included) and the other trace types agentx/report draws.
var Plotly = require('plotly.js/lib/core');

Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap'), require('plotly.js/lib/scattergl')]);

module.exports = Plotly;
