// plotly.js's own esbuild settings (its esbuild-config.js), minified: one bundle per entry of
// BUNDLES, plotly.js's core (scatter included) and the trace types listed.
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const { glsl } = require('esbuild-plugin-glsl');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');
const version = require('plotly.js/package.json').version;

// agentx/report/html.py BUNDLES lists the same: a page loads the smallest one holding its trace types
const BUNDLES = {
    'plotly-agentx.min.js': ['bar', 'heatmap', 'scattergl'],
    'plotly-agentx-svg.min.js': ['bar'],  // no WebGL nor heatmap: ~20 % less to fetch and compile
};

function build(name, types) {
    const entry = "var Plotly = require('plotly.js/lib/core');\n" +
        `Plotly.register([${types.map(t => `require('plotly.js/lib/${t}')`).join(', ')}]);\nmodule.exports = Plotly;\n`;
    return esbuild.build({
        stdin: {contents: entry, resolveDir: __dirname, sourcefile: 'entry.js'},
        outfile: `../../agentx/report/static/${name}`,
        format: 'iife',
        globalName: 'Plotly',
        bundle: true,
        minify: true,
        legalComments: 'none',
        banner: {js: `/**\n* plotly.js v${version} (${['scatter', ...types].join(', ')}; built by tools/plotly-bundle)\n` +
                     '* Copyright 2012-2026, Plotly, Inc.\n* All rights reserved.\n* Licensed under the MIT license\n*/'},
        plugins: [InlineCSSPlugin(), glsl({minify: true}), environmentPlugin({NODE_DEBUG: false})],
        alias: {regl: '@plotly/regl', stream: 'stream-browserify'},
        define: {global: 'window', 'define.amd': 'false'},
        target: 'es2016',
        logLevel: 'info'
    });
}

Promise.all(Object.entries(BUNDLES).map(([name, types]) => build(name, types))).catch(() => process.exit(1));
