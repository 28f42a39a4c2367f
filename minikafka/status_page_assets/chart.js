// A small line chart on an SVG element: one line per series, the y axis scaled to the largest value shown.
"use strict";
function drawChart(svg, series, unit) {
  const W = 460, H = 160, PAD = 30;
  const colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];
  let max = 0, len = 0;
  for (const name in series) {
    for (const v of series[name]) max = Math.max(max, v);
    len = Math.max(len, series[name].length);
  }
  max = max || 1;
  let out = `<line x1="${PAD}" y1="${H - PAD}" x2="${W}" y2="${H - PAD}" stroke="#999"/>` +
            `<text x="0" y="12" font-size="10">${max.toFixed(1)} ${unit}</text>`;
  let i = 0;
  for (const name in series) {
    const values = series[name], color = colors[i % colors.length];
    const points = values.map((v, k) => {
      const x = PAD + (W - PAD) * (len <= 1 ? 1 : (k + len - values.length) / (len - 1));
      const y = (H - PAD) - (H - 2 * PAD) * v / max;
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    }).join(" ");
    out += `<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${points}"/>` +
           `<text x="${PAD + 90 * i}" y="${H - 8}" font-size="10" fill="${color}">${name}</text>`;
    i++;
  }
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.innerHTML = out;
}
