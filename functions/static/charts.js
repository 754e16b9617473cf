// Small SVG charts for the operator view, no library and no build step.
// Each mark carries its data in data-* attributes, so a test can read what is drawn.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A round axis maximum: 1, 2 or 5 times a power of ten, at least `value`.
function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

// Axis and tooltip times (time.js): a chart over the last day names the day of each label,
// as it crosses midnight.
const clockLabel = (iso, withDay) => window.tickqTime.clock(iso, withDay);
const DAY_SPAN_MS = 6 * 3600e3;

const SIZE = { width: 720, height: 180, left: 44, right: 12, top: 10, bottom: 24 };
// The finished jobs' chart spans the page's width above the other two: twice as wide in
// the same height, so its text is drawn at the size of theirs.
const WIDE = { ...SIZE, width: 1440 };

// Whole-number steps where the axis is small (1, 2 ... 5), else five steps.
function tickCount(max) {
  return max >= 1 && max <= 5 ? max : 5;
}

function frame(title, max, size) {
  const ticks = tickCount(max);
  const { width, height, left, right, top, bottom } = size;
  const svg = svgEl("svg", {
    viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title, class: "chart",
  });
  svg.append(svgEl("title", {}, title));
  const plotHeight = height - top - bottom;
  for (let i = 0; i <= ticks; i++) {
    const value = (max * i) / ticks;
    const y = top + plotHeight - (plotHeight * i) / ticks;
    svg.append(svgEl("line", { x1: left, x2: width - right, y1: y, y2: y, class: "grid" }));
    svg.append(svgEl("text", { x: left - 6, y: y + 4, class: "axis", "text-anchor": "end" },
      Number.isInteger(value) ? value : value.toFixed(2).replace(/0$/, "")));
  }
  return svg;
}

// Stacked bars per bucket: succeeded, failed (retried), dead.
const SERIES = [
  { key: "succeeded", label: "succeeded" },
  { key: "failed", label: "failed (retried)" },
  { key: "dead", label: "dead" },
];

function throughputChart(buckets, perHour) {
  const { width, height, left, right, top, bottom } = WIDE;
  const totals = buckets.map((b) => SERIES.reduce((sum, s) => sum + (b[s.key] || 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  const svg = frame(perHour ? "jobs finished per hour" : "jobs finished per minute", max, WIDE);
  const plotWidth = width - left - right;
  const plotHeight = height - top - bottom;
  const slot = plotWidth / Math.max(1, buckets.length);
  const barWidth = Math.max(1, slot * 0.8);
  buckets.forEach((bucket, i) => {
    const x = left + i * slot + (slot - barWidth) / 2;
    let base = top + plotHeight;
    const group = svgEl("g", { class: "bucket", "data-start": bucket.start });
    for (const series of SERIES) {
      const count = bucket[series.key] || 0;
      if (!count) continue;
      const h = (plotHeight * count) / max;
      base -= h;
      group.append(svgEl("rect", {
        x: x.toFixed(1), y: base.toFixed(1), width: barWidth.toFixed(1), height: h.toFixed(1),
        class: `bar-${series.key}`, "data-series": series.key, "data-count": count,
      }, svgEl("title", {}, `${clockLabel(bucket.start, perHour)}: ${count} ${series.label}`)));
    }
    svg.append(group);
    const every = Math.ceil(buckets.length / 12);
    if (i % every === 0) {
      svg.append(svgEl("text", { x: x + barWidth / 2, y: height - 6, class: "axis time", "text-anchor": "middle" },
        clockLabel(bucket.start, perHour)));
    }
  });
  return svg;
}

// Lines over time: one per series, points at each sample.
function lineChart(title, samples, series, start, end) {
  const { width, height, left, right, top, bottom } = SIZE;
  const values = samples.flatMap((s) => series.map((line) => s[line.key] || 0));
  const max = niceMax(Math.max(0, ...values));
  const svg = frame(title, max, SIZE);
  const plotWidth = width - left - right;
  const plotHeight = height - top - bottom;
  const t0 = start.getTime();
  const span = Math.max(1, end.getTime() - t0);
  const withDay = span >= DAY_SPAN_MS;
  const xOf = (iso) => left + (plotWidth * (new Date(iso).getTime() - t0)) / span;
  const yOf = (v) => top + plotHeight - (plotHeight * (v || 0)) / max;
  for (const line of series) {
    const points = samples.map((s) => `${xOf(s.sampled_at).toFixed(1)},${yOf(s[line.key]).toFixed(1)}`);
    if (points.length > 1) {
      svg.append(svgEl("polyline", { points: points.join(" "), class: `line-${line.key}` }));
    }
    for (const s of samples) {
      svg.append(svgEl("circle", {
        cx: xOf(s.sampled_at).toFixed(1), cy: yOf(s[line.key]).toFixed(1), r: 2.5,
        class: `dot-${line.key}`, "data-series": line.key, "data-value": s[line.key] ?? 0,
        "data-at": s.sampled_at,
      }, svgEl("title", {}, `${clockLabel(s.sampled_at, withDay)}: ${line.label} ${s[line.key] ?? 0}`)));
    }
  }
  for (let i = 0; i <= 4; i++) {
    const at = new Date(t0 + (span * i) / 4);
    const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
    svg.append(svgEl("text", { x: left + (plotWidth * i) / 4, y: height - 6, class: "axis time", "text-anchor": anchor },
      clockLabel(at.toISOString(), withDay)));
  }
  return svg;
}

function legend(entries) {
  const node = document.createElement("p");
  node.className = "legend";
  for (const [cls, label] of entries) {
    const key = document.createElement("span");
    key.className = `key ${cls}`;
    node.append(key, ` ${label} `);
  }
  return node;
}

window.tickqCharts = { throughputChart, lineChart, legend, niceMax };
