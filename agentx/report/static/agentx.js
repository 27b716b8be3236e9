"use strict";
// agentx's page helpers (inlined in every page): the plotly config, the chart theme (light / dark by
// prefers-color-scheme), drawing a figure afresh, numbers by unit (toolkit.py fmt_number's rule).
const AX = (() => {
  const narrow = window.innerWidth < 640;
  // a phone: no toolbar (a tap shows it over the title, which takes the chart's width there)
  const CONFIG = {responsive: true, displaylogo: false, displayModeBar: !narrow};
  const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  const INK = dark ? {fg: "#e4e8ef", grid: "#333b48", bg: "#14171d", zero: "#5a6474", active: "#3a4456"}
                   : {fg: "#1d2330", grid: "#e3e7ee", bg: "#ffffff", zero: "#b8c0cc", active: "#dde6f3"};

  function wrapped(text, chars) {  // a title's lines (its own <br> kept) broken at spaces to at most `chars`
    return String(text).split("<br>").map(line => line.split(" ").reduce((out, word) => {
      const last = out[out.length - 1];
      if (last && (last + " " + word).length > chars) out.push(word); else out[out.length - 1] = last ? last + " " + word : word;
      return out;
    }, [""]).join("<br>")).join("<br>");
  }

  function themed(layout) {  // a copy of `layout` in the page's colours (its own settings win)
    const out = Object.assign({paper_bgcolor: INK.bg, plot_bgcolor: INK.bg}, layout);
    out.font = Object.assign({color: INK.fg, family: "system-ui, sans-serif"}, layout.font);
    let lines = 1;
    if (narrow && layout.title) {  // a phone: titles and legends in a smaller size, titles wrapped (plotly does not)
      const text = wrapped(layout.title.text || "", Math.floor((window.innerWidth - 32) / 6.4));
      lines = text.split("<br>").length;
      out.title = Object.assign({}, layout.title, {text, font: Object.assign({}, layout.title.font, {size: 11})},
                                lines > 1 ? {yref: "container", y: 1, yanchor: "top", pad: {t: 8}} : {});
      out.legend = Object.assign({}, layout.legend, {font: {size: 9}});
      if (lines > 1) out.margin = Object.assign({}, layout.margin, {t: Math.max((layout.margin || {}).t || 0, 14 * lines + 18)});
    }
    for (const key of Object.keys(layout).filter(k => /^[xy]axis\d*$/.test(k)).concat(["xaxis", "yaxis"])) {
      // an overlaying (right) axis: round ticks of its own (plotly's default, "sync", gave 0 / 227 / 455 / 682)
      const own = layout[key] && layout[key].overlaying ? {tickmode: "auto"} : {};
      out[key] = Object.assign({gridcolor: INK.grid, zerolinecolor: INK.zero, linecolor: INK.grid, automargin: true},
                               own, layout[key]);
    }
    if (layout.updatemenus) {  // a chart's buttons on a row of their own under its title: never over it
      const top = layout.title ? {y: 1, yanchor: "bottom", pad: {t: 0, r: 0, b: 6, l: 0}} : {};
      out.updatemenus = layout.updatemenus.map(m => Object.assign({bgcolor: INK.bg, bordercolor: INK.grid}, m, top,
                                                                  {font: Object.assign({}, m.font, {color: INK.fg})}));
      if (layout.title) {
        out.margin = Object.assign({}, layout.margin, {t: Math.max((layout.margin || {}).t || 0, 72 + 14 * (lines - 1))});
        out.title = Object.assign({}, out.title, {yref: "container", y: 1, yanchor: "top", pad: {t: 10}});
      }
    }
    return out;
  }

  // A legend under the plot placed 6 px below the x axis' title: plotly places it at a fraction of the
  // plot's height, the title at a fixed offset under the ticks, so on a short chart the two meet and
  // under a tall one (the request timeline) a blank band parts them; a few steps, as the move
  // changes the margin and so the plot's height.
  async function clearLegend(gd) {
    for (let step = 0; step < 3; step++) {
      const legend = gd.querySelector(".legend"), title = gd.querySelector(".xtitle");
      const fl = gd._fullLayout;
      if (!legend || !title || !fl.legend || fl.legend.y >= 0) return gd;
      const a = legend.getBoundingClientRect(), b = title.getBoundingClientRect(), gap = a.top - b.bottom;
      if (!b.height || a.bottom <= b.top || (gap >= 2 && gap <= 14)) return gd;
      await Plotly.relayout(gd, {"legend.y": fl.legend.y + (gap - 6) / fl._size.h});
    }
    return gd;
  }

  // in the dark, the palette's two darkest colours (its blue and black) in lighter tones, legible there
  const LIGHTER = dark ? {"#0072b2": "#3d9be0", "#000000": "#e4e8ef"} : {};
  function inked(data) {
    if (!dark) return data;
    const swap = obj => obj && typeof obj.color === "string" && LIGHTER[obj.color]
      ? Object.assign({}, obj, {color: LIGHTER[obj.color]}) : obj;
    return data.map(t => {
      const out = Object.assign({}, t);
      for (const key of ["line", "marker", "textfont"]) if (key in t) out[key] = swap(t[key]);
      return out;
    });
  }

  function react(div, fig) { return Plotly.react(div, inked(fig.data), themed(fig.layout), CONFIG).then(clearLegend); }

  // A fresh chart: plotly.react of a figure whose traces differ in kind and count from the drawn one can
  // keep stale state (the request timeline drew bars on wrong rows); purge it and draw anew.
  function redraw(div, fig) {
    Plotly.purge(div);
    return Plotly.newPlot(div, inked(fig.data), themed(fig.layout), CONFIG).then(clearLegend);
  }

  function fmt(v, unit) {
    if (v === null || v === undefined || Number.isNaN(v)) return "-";
    if (typeof v !== "number") return String(v);
    if (unit === "%") return (v * 100).toFixed(1) + "%";
    const a = Math.abs(v);
    if (a >= 100 || a === 0) return Math.round(v).toLocaleString("en-US");
    return a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : Number(v.toPrecision(3)).toString();
  }

  function esc(s) {  // text for innerHTML
    return String(s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})[c]);
  }

  return {CONFIG, dark, themed, react, redraw, fmt, esc};
})();
