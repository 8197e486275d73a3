// The contract table (tests/js/helpers/contract_table.js) on a page's main thread, through the
// package's proxy; tests/e2e/contract.test.mjs compares it row by row with Node's in-thread run.
import { MHAError, loadMHA } from '/web/src/browser.js';
import { fixtureFromBytes } from '/tests/js/helpers/fixture_data.js';
import { CONTRACT_FIXTURE, runContract } from '/tests/js/helpers/contract_table.js';

const response = await fetch(`/tests/fixtures/${CONTRACT_FIXTURE}`);
const fixture = fixtureFromBytes(CONTRACT_FIXTURE, new Uint8Array(await response.arrayBuffer()));
const lib = await loadMHA({ proxy: true });

const errorOf = (error) => ({ mhaError: error instanceof MHAError, message: error?.message });
const attempt = (read) => {
  try {
    return { value: read() };
  } catch (error) {
    return errorOf(error);
  }
};

window.contractTest = {
  info: lib.info,
  run: () => runContract(lib, fixture, MHAError),

  // A module the worker cannot allocate (JS cannot see it): created at once, its parameters known;
  // its first call rejects with the worker's error, its getters then throw that error, and so do
  // its later calls.
  async failedInWorker() {
    const mha = lib.createMultiheadAttention({ embedDim: 20000, numHeads: 8 });
    const before = attempt(() => mha.parameters.map((p) => p.name));
    const first = await mha.loadStateDict({}).then(() => ({ resolved: true }), errorOf);
    const after = attempt(() => mha.parameters);
    const later = await mha.loadStateDict({}).then(() => ({ resolved: true }), errorOf);
    const cache = attempt(() => mha.createKVCache({ batchSize: 1, maxLength: 4 }));
    mha.dispose();
    return { before, first, after, later, cache: cache.value ? 'made' : cache };
  },
};
document.title = 'ready';
