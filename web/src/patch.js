// A small RFC 6902 applier for the ops the kernel sends in STATE_DELTA
// (add, replace, remove), plus move, copy and test for completeness. It
// applies all or nothing: it works on a copy of the paths it touches and
// throws, naming the op, when one does not apply.

import { splitPointer } from './bindings.js';

function clone(v) {
  return v === undefined ? v : structuredClone(v);
}

function parentOf(doc, toks, op) {
  let v = doc;
  for (const t of toks.slice(0, -1)) {
    if (Array.isArray(v)) v = v[Number(t)];
    else if (v !== null && typeof v === 'object' && Object.hasOwn(v, t)) v = v[t];
    else throw new Error(`${op.op} ${op.path}: nothing is at its parent`);
    if (v === null || typeof v !== 'object') throw new Error(`${op.op} ${op.path}: the parent is not a container`);
  }
  return v;
}

function get(doc, path) {
  let v = doc;
  for (const t of splitPointer(path)) {
    if (Array.isArray(v) ? Number(t) < v.length : v !== null && typeof v === 'object' && Object.hasOwn(v, t)) v = v[t];
    else throw new Error(`nothing is at ${path}`);
  }
  return v;
}

function addAt(doc, path, value, op) {
  const toks = splitPointer(path);
  if (toks.length === 0) return value;
  const p = parentOf(doc, toks, op);
  const last = toks[toks.length - 1];
  if (Array.isArray(p)) {
    const i = last === '-' ? p.length : Number(last);
    if (!/^(0|[1-9]\d*)$/.test(last) && last !== '-') throw new Error(`${op.op} ${path}: not an array index`);
    if (i > p.length) throw new Error(`${op.op} ${path}: the index is past the end`);
    p.splice(i, 0, value);
  } else {
    p[last] = value;
  }
  return doc;
}

function removeAt(doc, path, op) {
  const toks = splitPointer(path);
  if (toks.length === 0) return undefined;
  const p = parentOf(doc, toks, op);
  const last = toks[toks.length - 1];
  if (Array.isArray(p)) {
    const i = Number(last);
    if (!(i < p.length)) throw new Error(`${op.op} ${path}: nothing is at its path`);
    p.splice(i, 1);
  } else {
    if (!Object.hasOwn(p, last)) throw new Error(`${op.op} ${path}: nothing is at its path`);
    delete p[last];
  }
  return doc;
}

/** applyPatch returns a new document with ops applied, or throws. */
export function applyPatch(doc, ops) {
  let d = clone(doc);
  for (const op of ops) {
    switch (op.op) {
      case 'add':
        d = addAt(d, op.path, clone(op.value), op);
        break;
      case 'remove':
        d = removeAt(d, op.path, op);
        break;
      case 'replace':
        get(d, op.path);
        d = removeAt(d, op.path, op);
        d = addAt(d ?? {}, op.path, clone(op.value), op);
        if (op.path === '') d = clone(op.value);
        break;
      case 'move': {
        const v = get(d, op.from);
        d = removeAt(d, op.from, op);
        d = addAt(d, op.path, v, op);
        break;
      }
      case 'copy':
        d = addAt(d, op.path, clone(get(d, op.from)), op);
        break;
      case 'test':
        if (JSON.stringify(get(d, op.path)) !== JSON.stringify(op.value)) throw new Error(`test ${op.path} failed`);
        break;
      default:
        throw new Error(`unknown op ${op.op}`);
    }
  }
  return d;
}

/** at returns the value at a JSON pointer, or undefined. */
export function at(doc, path) {
  try {
    return get(doc, path);
  } catch {
    return undefined;
  }
}
