// Heatmaps on canvas: one canvas pixel per cell, scaled up by CSS with `image-rendering: pixelated`,
// so drawing stays cheap at any size. Colour scales are linear interpolations between stops.

// Viridis, sampled at 9 points: perceptually uniform and readable for colour-blind people.
const VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];
// Blue - near white - red, for signed values centred on 0.
const DIVERGING = [[33, 102, 172], [103, 169, 207], [209, 229, 240], [247, 247, 247], [253, 219, 199], [239, 138, 98], [178, 24, 43]];
const NAN_COLOUR = [90, 90, 100];

const COLOUR_SCALES = { sequential: VIRIDIS, diverging: DIVERGING };

function colourAt(stops, t) {
  const x = Math.min(Math.max(t, 0), 1) * (stops.length - 1);
  const i = Math.min(Math.floor(x), stops.length - 2);
  const f = x - i;
  return stops[i].map((c, k) => c + (stops[i + 1][k] - c) * f);
}

function cssColour(stops, t) {
  const [r, g, b] = colourAt(stops, t);
  return `rgb(${r | 0}, ${g | 0}, ${b | 0})`;
}

// Scale limits for a set of values: [0, max] for sequential, [-m, m] for diverging; NaN ignored.
export function scaleRange(values, scale) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (Number.isNaN(v)) continue;
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  if (!Number.isFinite(hi)) return [0, 1];
  if (scale === 'diverging') {
    const m = Math.max(Math.abs(lo), Math.abs(hi)) || 1;
    return [-m, m];
  }
  return [Math.min(lo, 0), hi > Math.min(lo, 0) ? hi : 1];
}

// Draws a rows x cols matrix (row-major `values`) into `canvas`, each cell cellWidth x cellHeight
// CSS pixels: crisp blocks when cells are a pixel or more, smoothed when big maps are shrunk.
export function drawHeatmap(canvas, values, rows, cols, { scale, range, cellWidth, cellHeight = cellWidth }) {
  const stops = COLOUR_SCALES[scale];
  const [lo, hi] = range;
  canvas.width = cols;
  canvas.height = rows;
  canvas.style.width = `${cols * cellWidth}px`;
  canvas.style.height = `${rows * cellHeight}px`;
  canvas.style.imageRendering = cellWidth < 1 || cellHeight < 1 ? 'auto' : 'pixelated';
  const context = canvas.getContext('2d');
  const image = context.createImageData(cols, rows);
  for (let i = 0; i < rows * cols; i++) {
    const v = values[i];
    const [r, g, b] = Number.isNaN(v) ? NAN_COLOUR : colourAt(stops, (v - lo) / (hi - lo));
    image.data.set([r, g, b, 255], 4 * i);
  }
  context.putImageData(image, 0, 0);
}

// A horizontal colour bar with its limits, drawn into `element` (a container).
export function drawLegend(element, { scale, range, label, hasNaN }) {
  const stops = COLOUR_SCALES[scale];
  const gradient = stops.map((_, i) => cssColour(stops, i / (stops.length - 1))).join(', ');
  const format = (v) => (Math.abs(v) >= 100 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(1) : v.toFixed(2));
  element.innerHTML = `
    <span class="legend-label">${label}</span>
    <span class="legend-value">${format(range[0])}</span>
    <span class="legend-bar"></span>
    <span class="legend-value">${format(range[1])}</span>
    ${hasNaN ? '<span class="legend-nan" title="not a number: every key of that query is masked">NaN</span>' : ''}`;
  // Set through the DOM: a style attribute in markup is what a Content-Security-Policy refuses.
  element.querySelector('.legend-bar').style.background = `linear-gradient(to right, ${gradient})`;
}

// The cell under a pointer event on a heatmap canvas, or null when outside.
export function cellAt(canvas, event, rows, cols) {
  const box = canvas.getBoundingClientRect();
  const col = Math.floor(((event.clientX - box.left) / box.width) * cols);
  const row = Math.floor(((event.clientY - box.top) / box.height) * rows);
  return row >= 0 && row < rows && col >= 0 && col < cols ? { row, col } : null;
}

// Shows `describe(row, col)` in a floating tooltip while the pointer is over `canvas`.
export function attachTooltip(canvas, tooltip, rows, cols, describe) {
  canvas.onpointermove = (event) => {
    const cell = cellAt(canvas, event, rows, cols);
    if (!cell) {
      tooltip.hidden = true;
      return;
    }
    tooltip.textContent = describe(cell.row, cell.col);
    tooltip.hidden = false;
    tooltip.style.left = `${event.clientX + 14}px`;
    tooltip.style.top = `${event.clientY + 14}px`;
  };
  canvas.onpointerleave = () => {
    tooltip.hidden = true;
  };
}
