// Number and error formats the report's sections share.
export const MiB = 1 << 20;

// Three significant digits or so: 123, 12.3, 1.23 (digits below 10).
export const fixed = (value, digits) => value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : digits);

// The reason of a failure, without onnxruntime's source paths and signatures.
export function shortError(error) {
  const ort = /ERROR_MESSAGE: (?:.*\(\) )?(.*)$/.exec(error);
  const reason = ort ? ort[1] : error;
  return reason.length > 60 ? `${reason.slice(0, 57)}...` : reason;
}
