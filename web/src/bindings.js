// Bindings of the component catalog orrery/1, as docs/bindings.md defines
// them: a template is literal text and ${…} expressions that only read,
// compare and format the data. This is a port of ui/component's Go
// evaluator; web/bindings_test.go checks both give the same text.

const SPACE = ' \t\n\r';

/** Parses a template; throws Error with the offset on bad syntax. */
export function parseTemplate(s) {
  const parts = [];
  let lit = '';
  const flush = () => { if (lit) { parts.push({ lit }); lit = ''; } };
  for (let i = 0; i < s.length;) {
    if (s[i] === '\\' && s.startsWith('${', i + 1)) {
      lit += '${';
      i += 3;
    } else if (s.startsWith('${', i)) {
      const end = exprEnd(s, i + 2);
      const e = parseExpr(s.slice(i + 2, end), i + 2);
      flush();
      parts.push({ expr: e });
      i = end + 1;
    } else {
      lit += s[i];
      i++;
    }
  }
  flush();
  return parts;
}

function exprEnd(s, start) {
  for (let i = start; i < s.length; i++) {
    if (s[i] === '}') return i;
    if (s[i] === '"') {
      const j = stringEnd(s, i);
      if (j < 0) throw new Error(`at offset ${i}: the string is not closed`);
      i = j;
    }
  }
  throw new Error(`at offset ${start - 2}: the binding is not closed; end it with }`);
}

function stringEnd(s, i) {
  for (let j = i + 1; j < s.length; j++) {
    if (s[j] === '\\') j++;
    else if (s[j] === '"') return j;
  }
  return -1;
}

function parseExpr(src, off) {
  let i = 0;
  const done = () => i >= src.length;
  const space = () => { while (!done() && SPACE.includes(src[i])) i++; };
  const fail = (at, why) => { throw new Error(`at offset ${off + at}: ${why}`); };
  const word = () => {
    const start = i;
    while (!done() && !(SPACE + '|').includes(src[i])) i++;
    return src.slice(start, i);
  };
  const operand = () => {
    if (done()) fail(i, 'a value is missing');
    const start = i;
    const c = src[i];
    if (c === '/') return { ptr: splitPointer(word()) };
    if (c === '"') {
      const end = stringEnd(src, i);
      if (end < 0) fail(start, 'the string is not closed');
      i = end + 1;
      try {
        return { lit: JSON.parse(src.slice(start, end + 1)) };
      } catch {
        return fail(start, 'the string is not a JSON string');
      }
    }
    if (c === '-' || (c >= '0' && c <= '9')) {
      const w = word();
      if (!/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(w)) fail(start, `${JSON.stringify(w)} is not a JSON number`);
      return { lit: Number(w) };
    }
    const w = word();
    for (const [name, v] of [['true', true], ['false', false], ['null', null]]) {
      if (w.startsWith(name)) { i = start + name.length; return { lit: v }; }
    }
    return fail(start, `${JSON.stringify(w)} is not a value`);
  };
  const e = { not: false, left: null, op: '', right: null, format: null };
  space();
  if (done()) fail(0, 'the binding is empty');
  if (src[i] === '!') { e.not = true; i++; space(); }
  e.left = operand();
  space();
  for (const op of ['==', '!=', '<=', '>=', '<', '>']) {
    if (src.startsWith(op, i)) {
      if (e.not) fail(i, '! cannot start a comparison');
      i += op.length;
      e.op = op;
      space();
      e.right = operand();
      space();
      break;
    }
  }
  if (!done() && src[i] === '|') {
    i++;
    space();
    e.format = parseFormat(word(), (why) => fail(i, why));
    space();
  }
  if (!done()) fail(i, `unexpected ${JSON.stringify(src.slice(i))}`);
  return e;
}

function parseFormat(w, fail) {
  const colon = w.indexOf(':');
  const name = colon < 0 ? w : w.slice(0, colon);
  const arg = colon < 0 ? null : w.slice(colon + 1);
  const f = { name, places: -1 };
  switch (name) {
    case 'number':
    case 'percent':
      if (arg !== null) {
        if (!/^[0-6]$/.test(arg)) fail(`${name} takes 0 to 6 decimals`);
        f.places = Number(arg);
      }
      return f;
    case 'count': {
      const noun = /^[\p{L}'-]{1,32}$/u;
      const [one, many = '', extra] = (arg ?? '').split(',');
      if (arg === null || extra !== undefined || !noun.test(one) || (arg.includes(',') && !noun.test(many))) {
        fail('count takes a noun and optionally its plural');
      }
      f.singular = one;
      f.plural = many || pluralOf(one);
      return f;
    }
    case 'duration':
    case 'json':
      if (arg !== null) fail(`${name} takes no argument`);
      return f;
  }
  return fail(`unknown format ${JSON.stringify(w)}`);
}

function pluralOf(noun) {
  const l = noun.toLowerCase();
  if (/(s|x|z|ch|sh)$/.test(l)) return noun + 'es';
  if (l.length >= 2 && l.endsWith('y') && !'aeiou'.includes(l[l.length - 2])) return noun.slice(0, -1) + 'ies';
  return noun + 's';
}

/** Splits an RFC 6901 pointer into its unescaped tokens. */
export function splitPointer(p) {
  if (p === '') return [];
  if (p[0] !== '/') throw new Error(`${JSON.stringify(p)} is not a JSON pointer`);
  return p.slice(1).split('/').map((t) => {
    if (/~[^01]|~$/.test(t)) throw new Error(`the pointer ${JSON.stringify(p)} has a bad ~`);
    return t.replaceAll('~1', '/').replaceAll('~0', '~');
  });
}

/** Returns [value, found] at the tokens in data. */
export function lookup(data, toks) {
  let v = data;
  for (const t of toks) {
    if (Array.isArray(v)) {
      if (!/^(0|[1-9]\d{0,8})$/.test(t) || Number(t) >= v.length) return [undefined, false];
      v = v[Number(t)];
    } else if (v !== null && typeof v === 'object') {
      if (!Object.hasOwn(v, t)) return [undefined, false];
      v = v[t];
    } else {
      return [undefined, false];
    }
  }
  return [v, true];
}

function evalOperand(o, data) {
  return o.ptr ? lookup(data, o.ptr) : [o.lit, true];
}

/** truthy is false for missing, null, false, 0, "", [] and {}. */
export function truthy(v, ok) {
  if (!ok || v === null || v === undefined) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return Boolean(v);
}

function equal(a, b) {
  if (a === null || typeof a !== 'object') return a === b;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i]));
  }
  if (b === null || typeof b !== 'object' || Array.isArray(b)) return false;
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
}

const utf8 = new TextEncoder();

function compareBytes(a, b) {
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
  }
  return x.length - y.length;
}

function compare(op, l, lok, r, rok) {
  if (!lok) l = null;
  if (!rok) r = null;
  if (op === '==') return equal(l, r);
  if (op === '!=') return !equal(l, r);
  let c;
  if (typeof l === 'number' && typeof r === 'number') c = l < r ? -1 : l > r ? 1 : 0;
  else if (typeof l === 'string' && typeof r === 'string') c = compareBytes(l, r);
  else return false;
  return { '<': c < 0, '<=': c <= 0, '>': c > 0, '>=': c >= 0 }[op];
}

function evalExpr(e, data) {
  const [l, lok] = evalOperand(e.left, data);
  let v;
  if (e.not) {
    v = !truthy(l, lok);
  } else if (e.op) {
    const [r, rok] = evalOperand(e.right, data);
    v = compare(e.op, l, lok, r, rok);
  } else {
    if (!lok) return [undefined, false];
    v = l;
  }
  if (e.format) {
    if (v === null) return [undefined, false];
    return [applyFormat(e.format, v), true];
  }
  return [v, true];
}

/** Renders a parsed template to text for data. */
export function render(parts, data) {
  let out = '';
  for (const p of parts) {
    if (!p.expr) {
      out += p.lit;
      continue;
    }
    const [v, ok] = evalExpr(p.expr, data);
    if (ok) out += toText(v);
  }
  return out;
}

/** Returns [value, ok]: a typed binding's JSON value, or the rendered text. */
export function value(parts, data) {
  if (parts.length === 1 && parts[0].expr) {
    const [v, ok] = evalExpr(parts[0].expr, data);
    if (!ok || v === null || v === undefined) return [undefined, false];
    return [v, true];
  }
  return [render(parts, data), true];
}

/** Renders a template string for data; bad syntax renders as the string. */
export function renderString(s, data) {
  return render(parseTemplate(s), data);
}

/** Marshals like Go's encoder with SetEscapeHTML(false) and sorted keys. */
export function marshal(v) {
  return JSON.stringify(sortKeys(v)).replace(/[\u2028\u2029]/g, (c) => (c === '\u2028' ? '\\u2028' : '\\u2029'));
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v === null || typeof v !== 'object') return v;
  const keys = Object.keys(v).sort(compareBytes);
  const out = {};
  for (const k of keys) out[k] = sortKeys(v[k]);
  return out;
}

/** toText converts a bound value inside a template. */
export function toText(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') return numberText(v);
  return marshal(v);
}

/** numberText writes a number as Go's numberText does for its float64. */
export function numberText(n) {
  if (Object.is(n, -0) || n === 0) return '0';
  if (Number.isInteger(n) && Math.abs(n) <= Number.MAX_SAFE_INTEGER) return String(n);
  const a = Math.abs(n);
  if (a >= 1e-4 && a < 1e15) return plain(n);
  return goExp(n);
}

// plain writes the shortest decimal of n without an exponent.
function plain(n) {
  const s = String(Math.abs(n));
  const sign = n < 0 ? '-' : '';
  const m = /^(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (!m) return sign + s;
  const digits = m[1] + (m[2] || '');
  const exp = Number(m[3]);
  if (exp < 0) return sign + '0.' + '0'.repeat(-exp - 1) + digits;
  return sign + digits + '0'.repeat(Math.max(0, exp - digits.length + 1));
}

// goExp writes n as Go's 'g' with the shortest digits: 1e-05, 1.5e+20.
function goExp(n) {
  const [mant, exp] = n.toExponential().split('e');
  const sign = exp[0] === '-' ? '-' : '+';
  const digits = exp.replace(/^[+-]/, '');
  return mant + 'e' + sign + (digits.length < 2 ? '0' + digits : digits);
}

function decimal(n) {
  const s = plain(Math.abs(n));
  const [ip, fp = ''] = s.split('.');
  return { neg: n < 0, ip, fp };
}

function roundHalfUp(ip, fp, places) {
  if (fp.length <= places) return [ip, fp + '0'.repeat(places - fp.length)];
  const up = fp[places] >= '5';
  const digits = (ip + fp.slice(0, places)).split('');
  if (up) {
    let i = digits.length - 1;
    for (; i >= 0; i--) {
      if (digits[i] < '9') {
        digits[i] = String.fromCharCode(digits[i].charCodeAt(0) + 1);
        break;
      }
      digits[i] = '0';
    }
    if (i < 0) digits.unshift('1');
  }
  const cut = digits.length - places;
  return [digits.slice(0, cut).join(''), digits.slice(cut).join('')];
}

function shift2(ip, fp) {
  fp += '00';
  ip = (ip + fp.slice(0, 2)).replace(/^0+/, '') || '0';
  return [ip, fp.slice(2).replace(/0+$/, '')];
}

function signed(neg, ip, fp) {
  let s = ip;
  if (fp) s += '.' + fp;
  if (neg && s.replace(/[0.,]/g, '') !== '') s = '-' + s;
  return s;
}

function group(ip) {
  return ip.replace(/\B(?=(\d{3})+$)/g, ',');
}

function duration(sec) {
  if (!Number.isFinite(sec) || Math.abs(sec) >= 1e15) return goExp(sec) + 's';
  let sign = '';
  if (sec < 0) { sign = '-'; sec = -sec; }
  const ms = Math.round(sec * 1000);
  if (ms < 1000) return ms === 0 ? '0s' : sign + ms + 'ms';
  const total = Math.round(sec);
  const units = [[86400, 'd'], [3600, 'h'], [60, 'm'], [1, 's']];
  for (let i = 0; i < units.length; i++) {
    const [size, name] = units[i];
    if (total < size) continue;
    let s = sign + Math.floor(total / size) + name;
    if (i + 1 < units.length) {
      const [nsize, nname] = units[i + 1];
      const r = Math.floor((total % size) / nsize);
      if (r > 0) s += ' ' + r + nname;
    }
    return s;
  }
  return '0s';
}

function applyFormat(f, v) {
  if (f.name === 'json') return marshal(v);
  if (typeof v !== 'number') return toText(v);
  switch (f.name) {
    case 'number': {
      let { neg, ip, fp } = decimal(v);
      if (f.places >= 0) [ip, fp] = roundHalfUp(ip, fp, f.places);
      return signed(neg, group(ip), fp);
    }
    case 'percent': {
      let { neg, ip, fp } = decimal(v);
      [ip, fp] = shift2(ip, fp);
      const places = Math.max(f.places, 0);
      fp = fp.length > places ? fp.slice(0, places) : fp + '0'.repeat(places - fp.length);
      return signed(neg, group(ip), fp) + '%';
    }
    case 'duration':
      return duration(v);
    case 'count': {
      const noun = v === 1 ? f.singular : f.plural;
      const { neg, ip, fp } = decimal(v);
      return signed(neg, group(ip), fp) + ' ' + noun;
    }
  }
  return toText(v);
}

/**
 * bindProp evaluates a prop at any depth: every string is a template. It
 * returns [value, ok]; ok is false when a typed binding yields nothing.
 */
export function bindProp(v, data) {
  if (typeof v === 'string') return value(parseTemplate(v), data);
  if (Array.isArray(v)) {
    return [v.map((x) => {
      const [y, ok] = bindProp(x, data);
      return ok ? y : null;
    }), true];
  }
  if (v !== null && typeof v === 'object') {
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      const [y, ok] = bindProp(x, data);
      if (ok) out[k] = y;
    }
    return [out, true];
  }
  return [v, true];
}

/** shown reports whether a node's when lets it show. */
export function shown(node, data) {
  if (node.when === undefined) return true;
  if (typeof node.when === 'boolean') return node.when;
  const [v, ok] = value(parseTemplate(String(node.when)), data);
  return truthy(v, ok);
}
