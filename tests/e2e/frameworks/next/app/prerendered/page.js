// A server component prerendered at build time: the package in Node, during `next build`.
import { loadMHA } from 'mha-wasm';
import { check } from '../check.js';

export default async function Prerendered() {
  return <pre id="result">{JSON.stringify(await check(loadMHA))}</pre>;
}
