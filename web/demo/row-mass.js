// The mass a row of weights does not give to any key: with attention sinks the softmax's
// denominator has one more term, so rows sum to less than 1 and the sink holds the rest. Drawn as
// a one-column strip beside a map (rows line up with its queries).
import { attachTooltip, drawHeatmap } from './heatmap.js';

const SHOWN_ABOVE = 1e-5; // float32 rows of plain softmax sum to 1 within this

// Sums of a rows x cols matrix's rows (NaN rows stay NaN).
export function rowSums(values, rows, cols) {
  return Array.from({ length: rows }, (_, r) => {
    let sum = 0;
    for (let c = 0; c < cols; c++) sum += values[r * cols + c];
    return sum;
  });
}

// 1 - row sum per row, or null when every row sums to 1 (no sink takes anything).
export function missingMass(values, rows, cols) {
  const missing = rowSums(values, rows, cols).map((sum) => 1 - sum);
  return missing.some((m) => m > SHOWN_ABOVE) ? missing : null;
}

// Appends to `parent` a strip of the missing mass per row (cells cellHeight high), with its
// values in data-missing-mass and under the pointer.
export function appendMissingMassStrip(parent, missing, cellHeight, tooltip) {
  const canvas = document.createElement('canvas');
  canvas.className = 'heatmap missing-mass';
  canvas.dataset.missingMass = JSON.stringify(missing);
  const values = Float32Array.from(missing);
  drawHeatmap(canvas, values, missing.length, 1, { scale: 'sequential', range: [0, 1], cellWidth: Math.max(cellHeight, 6), cellHeight });
  attachTooltip(canvas, tooltip, missing.length, 1, (r) =>
    `query ${r}: the keys get ${(1 - missing[r]).toPrecision(4)}, the sink ${missing[r].toPrecision(4)}`);
  parent.append(canvas);
  return canvas;
}
