// The score options of today's models as the page's controls set them: scale, soft-cap, sliding
// window, ALiBi, attention sinks and rotary positions (docs/design.md, "The attention of today's
// models"). Reads the controls, shows the inputs that apply, and turns them into module config
// fields; bad text throws Errors meant for people.
const byId = (id) => document.getElementById(id);

// A positive finite number, or undefined for an empty box (the engine's default).
function optionalPositive(text, label, emptyMeans) {
  const t = text.trim();
  if (t === '') return undefined;
  const v = Number(t);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${label} must be a positive number, or empty for ${emptyMeans}; got "${text}"`);
  return v;
}

// "W" or "left, right" (brackets allowed); undefined when empty.
export function parseWindow(text) {
  const t = text.trim().replace(/^\[|\]$/g, '');
  if (t === '') return undefined;
  const parts = t.split(',').map((p) => p.trim());
  const whole = parts.map(Number);
  const bad = parts.length > 2 || parts.some((p) => p === '') || whole.some((v) => !Number.isInteger(v) || v < 0) ||
    (parts.length === 1 && whole[0] < 1);
  if (bad) throw new Error(`window must be a whole number W >= 1 or "left, right" (whole numbers >= 0), or empty for none; got "${text}"`);
  return parts.length === 1 ? whole[0] : whole;
}

// One number for every head, or one per head separated by commas.
export function parsePerHead(text, label, numHeads) {
  const values = text.split(',').map((p) => p.trim());
  const numbers = values.map(Number);
  if (values.some((p) => p === '') || numbers.some((v) => !Number.isFinite(v))) {
    throw new Error(`${label} must be a number, or one per head separated by commas; got "${text}"`);
  }
  if (numbers.length !== 1 && numbers.length !== numHeads) {
    throw new Error(`${label}: give one value or one per head (${numHeads}); got ${numbers.length}`);
  }
  return Float32Array.from({ length: numHeads }, (_, h) => numbers[numbers.length === 1 ? 0 : h]);
}

// The controls' raw values (parsed later, when the number of heads is known).
export function readScoreSettings() {
  return {
    scale: byId('scale').value,
    softcap: byId('softcap').value,
    window: byId('window').value,
    alibi: byId('alibi').value, // off | paper | slopes
    alibiSlopes: byId('alibi-slopes').value,
    alibiSymmetric: byId('alibi-symmetric').checked,
    sinks: byId('sinks').checked,
    sinkLogits: byId('sink-logits').value,
    rotary: byId('rotary').checked,
  };
}

// Shows the inputs the chosen options use; a model file's sinks are the file's (listed with it).
export function syncScoreControls(settings, fileHasSinks) {
  byId('alibi-slopes-row').hidden = settings.alibi !== 'slopes';
  byId('alibi-symmetric-row').hidden = settings.alibi === 'off';
  const sinks = byId('sinks');
  sinks.disabled = fileHasSinks !== null;
  if (fileHasSinks !== null) sinks.checked = fileHasSinks;
  byId('sink-logits-row').hidden = !sinks.checked || fileHasSinks !== null;
}

// Returns { config, sinkLogits }: the module config fields to add, and the sink logits of the
// page's own weights (null when sinks are off or the weights come from a file).
export function scoreOptions(settings, numHeads, weightsFromFile) {
  const config = {};
  const scale = optionalPositive(settings.scale, 'scale', '1/√(head dim)');
  if (scale !== undefined) config.scale = scale;
  const softcap = optionalPositive(settings.softcap, 'soft-cap', 'none');
  if (softcap !== undefined) config.softcap = softcap;
  const window = parseWindow(settings.window);
  if (window !== undefined) config.window = window;
  if (settings.alibi !== 'off') {
    const slopes = settings.alibi === 'slopes' ? parsePerHead(settings.alibiSlopes, 'ALiBi slopes', numHeads) : undefined;
    config.alibi = !slopes && !settings.alibiSymmetric ? true : { slopes, symmetric: settings.alibiSymmetric };
  }
  if (settings.sinks) config.sinks = true;
  // Llama's RoPE (rotate-half pairs, base 10000): what a batch of prompts needs for `positions`.
  if (settings.rotary) config.rotary = { base: 10000 };
  const sinkLogits = settings.sinks && !weightsFromFile ? parsePerHead(settings.sinkLogits, 'sink logits', numHeads) : null;
  return { config, sinkLogits };
}
