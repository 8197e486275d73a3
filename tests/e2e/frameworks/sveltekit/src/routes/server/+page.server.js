// A server-rendered page: the package in Node.
import { loadMHA } from 'mha-wasm';
import { check } from '$lib/check.js';

export async function load() {
  return { result: JSON.stringify(await check(loadMHA)) };
}
