'use client';
// A client component: the package in the browser (through its proxy on the page's main thread).
import { loadMHA } from 'mha-wasm';
import { useEffect, useState } from 'react';
import { check } from './check.js';

export default function Client() {
  const [result, setResult] = useState('');
  useEffect(() => {
    check(loadMHA).then((r) => setResult(JSON.stringify(r)), (e) => setResult(JSON.stringify({ error: String(e) })));
  }, []);
  return <pre id="result">{result}</pre>;
}
