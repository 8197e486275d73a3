// The decoding mode's Save and Restore: one saved decoding (its cache's bytes from cache.save(),
// the steps the page recorded, and what they were made with) kept in IndexedDB, so that it
// survives a reload of the page.
const DB = 'mha-wasm-demo';
const STORE = 'decoding';
const KEY = 'saved';

function open() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(DB, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

// Runs `use(store)` in a transaction; resolves to the value of the request it returns.
async function transact(mode, use) {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const request = use(db.transaction(STORE, mode).objectStore(STORE));
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  } finally {
    db.close();
  }
}

// saved: { key, mode, recorded, bytes } (structured-cloneable).
export const storeDecoding = (saved) => transact('readwrite', (store) => store.put(saved, KEY));

// The saved decoding, or undefined.
export const storedDecoding = () => transact('readonly', (store) => store.get(KEY));
