// Elementwise check of a result against an expected tensor, with the project's float32 tolerance
// against PyTorch: |actual - expected| <= ATOL + RTOL * |expected|; NaN must be NaN in both.
export const ATOL = 1e-4;
export const RTOL = 1e-3;

// actual, expected: { data, shape }; data may hold null for NaN (as read back from JSON).
// Returns { ok, maxAbsError, mismatches, firstMismatch, message }.
export function compareTensors(actual, expected) {
  const shapeOf = (t) => `[${t.shape.join(', ')}]`;
  if (shapeOf(actual) !== shapeOf(expected)) {
    return { ok: false, maxAbsError: NaN, mismatches: -1, message: `shape ${shapeOf(actual)}, expected ${shapeOf(expected)}` };
  }
  let maxAbsError = 0;
  let mismatches = 0;
  let firstMismatch = -1;
  for (let i = 0; i < expected.data.length; i++) {
    const a = actual.data[i] ?? NaN;
    const e = expected.data[i] ?? NaN;
    const bothNaN = Number.isNaN(a) && Number.isNaN(e);
    const error = Math.abs(a - e);
    if (!bothNaN && !(error <= ATOL + RTOL * Math.abs(e))) {
      mismatches++;
      if (firstMismatch < 0) firstMismatch = i;
    }
    if (!bothNaN && Number.isFinite(error)) maxAbsError = Math.max(maxAbsError, error);
  }
  const message = mismatches === 0
    ? `all ${expected.data.length} values within ${ATOL} + ${RTOL}·|e|`
    : `${mismatches} of ${expected.data.length} values off; first at index ${firstMismatch}: ${actual.data[firstMismatch]} vs ${expected.data[firstMismatch]}`;
  return { ok: mismatches === 0, maxAbsError, mismatches, firstMismatch, message };
}
