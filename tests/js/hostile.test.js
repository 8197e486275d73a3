// Hostile inputs on both builds: types and shapes no one should pass, buffers
// detached or shared or viewed at odd offsets, NaN and Infinity, requests the
// 4 GiB heap cannot hold, getters that change their answer. Each either
// throws an MHAError (never a trap, an abort or a read past its data) or gives
// PyTorch's result; the same module then still runs a valid forward that
// matches PyTorch.
import assert from 'node:assert/strict';
import { errorTableSuite } from './helpers/error_table.js';
import { assertClose, assertMatchesFixture, loadFixture } from './helpers/fixtures.js';
import { HOSTILE_FIXTURE, hostileTable } from './helpers/hostile_table.js';

const fixture = loadFixture(HOSTILE_FIXTURE);
const { errors, results } = hostileTable(fixture, { assert, assertClose, assertMatchesFixture });
errorTableSuite('hostile input', fixture, errors, results);
