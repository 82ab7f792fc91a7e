// Drawing surfaces ({"kind": {"t": …}}) and component nodes as DOM. Text
// from agents only ever goes in through textContent, or through the
// sanitized markdown renderer; nothing is injected as HTML.

import {
  Chart, BarController, LineController, ScatterController, DoughnutController, BarElement, LineElement,
  PointElement, ArcElement, CategoryScale, LinearScale, Filler, Legend, Tooltip,
} from 'chart.js';
import { renderMarkdown } from './markdown.js';
import { bindProp, shown, numberText } from './bindings.js';

Chart.register(BarController, LineController, ScatterController, DoughnutController, BarElement, LineElement,
  PointElement, ArcElement, CategoryScale, LinearScale, Filler, Legend, Tooltip);

/** el builds an element with a class and children (strings become text). */
export function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const k of kids.flat()) {
    if (k === null || k === undefined || k === false) continue;
    e.append(typeof k === 'string' ? document.createTextNode(k) : k);
  }
  return e;
}

/** button builds a button that runs fn when pressed. */
export function button(label, fn, cls = '') {
  const b = el('button', cls, label);
  b.type = 'button';
  b.addEventListener('click', fn);
  return b;
}

const STATUS = {
  pending: ['○', 'pending'], running: ['◐', 'running'], done: ['✓', 'done'], failed: ['✗', 'failed'],
  cancelled: ['⊘', 'cancelled'], blocked: ['■', 'blocked'],
};

function statusTag(s) {
  const [glyph, word] = STATUS[s] || ['?', String(s)];
  return el('span', `status status-${word}`, `${glyph} ${word}`);
}

// The palette charts use; patterns of dash and point style make series
// tell apart without colour.
const COLOURS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#9c755f'];
const DASHES = [[], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3], [10, 4], [4, 4], [12, 2]];
const POINTS = ['circle', 'rect', 'triangle', 'rectRot', 'cross', 'star', 'crossRot', 'line'];

/** chartCaption is a chart's values as words, so colour is never needed. */
function chartCaption(k) {
  const unit = k.unit ? (k.unit === '%' ? '%' : ` ${k.unit}`) : '';
  const series = k.series || [];
  if (k.kind === 'gauge') {
    const [v, max = 100] = series[0]?.values || [];
    return `${series[0]?.label ? series[0].label + ': ' : ''}${numberText(v)}${unit} of ${numberText(max)}${unit}`;
  }
  return series.map((s) => {
    const vals = (s.values || []).map((v, i) => {
      if (Array.isArray(v)) return `(${numberText(v[0])}, ${numberText(v[1])})`;
      const label = k.labels?.[i];
      return label !== undefined ? `${label} ${numberText(v)}${unit}` : `${numberText(v)}${unit}`;
    });
    return (s.label ? `${s.label}: ` : '') + vals.join(', ');
  }).join('; ');
}

function chartConfig(k) {
  const series = k.series || [];
  const labels = k.labels || (series[0]?.values || []).map((_, i) => String(i + 1));
  const ds = (s, i, extra = {}) => ({
    label: s.label || '', data: s.values, backgroundColor: COLOURS[i % 8], borderColor: COLOURS[i % 8],
    borderDash: DASHES[i % 8], pointStyle: POINTS[i % 8], ...extra,
  });
  const base = { animation: false, responsive: true, maintainAspectRatio: false, plugins: { legend: { display: series.length > 1 } } };
  switch (k.kind) {
    case 'bars':
    case 'columns':
    case 'stacked':
      return {
        type: 'bar',
        data: { labels, datasets: series.map((s, i) => ds(s, i)) },
        options: {
          ...base, indexAxis: k.kind === 'bars' ? 'y' : 'x',
          scales: k.kind === 'stacked' ? { x: { stacked: true }, y: { stacked: true } } : {},
        },
      };
    case 'line':
    case 'area':
    case 'sparkline':
      return {
        type: 'line',
        data: { labels, datasets: series.map((s, i) => ds(s, i, { fill: k.kind === 'area', pointRadius: k.kind === 'sparkline' ? 0 : 3 })) },
        options: k.kind === 'sparkline'
          ? { ...base, plugins: { legend: { display: false }, tooltip: { enabled: false } }, scales: { x: { display: false }, y: { display: false } } }
          : base,
      };
    case 'scatter':
      return {
        type: 'scatter',
        data: { datasets: series.map((s, i) => ds(s, i, { data: s.values.map(([x, y]) => ({ x, y })) })) },
        options: { ...base, plugins: { legend: { display: true } } },
      };
    case 'donut':
      return {
        type: 'doughnut',
        data: { labels, datasets: [{ data: series[0]?.values || [], backgroundColor: labels.map((_, i) => COLOURS[i % 8]) }] },
        options: { ...base, plugins: { legend: { display: true } } },
      };
    case 'gauge': {
      const [v = 0, max = 100] = series[0]?.values || [];
      return {
        type: 'doughnut',
        data: { labels: ['value', 'rest'], datasets: [{ data: [v, Math.max(0, max - v)], backgroundColor: [COLOURS[0], '#ddd'] }] },
        options: { ...base, rotation: -90, circumference: 180, plugins: { legend: { display: false } } },
      };
    }
  }
  return null;
}

function drawChart(k) {
  const fig = el('figure', `chart chart-${k.kind}`);
  const box = el('div', k.kind === 'sparkline' ? 'chart-box spark' : 'chart-box');
  const canvas = el('canvas');
  const caption = chartCaption(k);
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', caption);
  box.append(canvas);
  fig.append(box, el('figcaption', 'chart-caption', caption));
  const cfg = chartConfig(k);
  if (cfg) {
    // Chart.js needs the canvas in the document to size it.
    queueMicrotask(() => {
      if (canvas.isConnected) new Chart(canvas, cfg);
    });
  }
  return fig;
}

/** chartOf returns the Chart.js chart drawn on a canvas, if any. */
export function chartOf(canvas) {
  return Chart.getChart(canvas);
}

/** destroyCharts releases the charts under root before it is replaced. */
export function destroyCharts(root) {
  for (const c of root.querySelectorAll('canvas')) Chart.getChart(c)?.destroy();
}

function drawDiff(k) {
  const pre = el('pre', 'diff');
  for (const line of String(k.value || '').split('\n')) {
    let cls = 'ctx';
    if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ') || line.startsWith('index ')) cls = 'meta';
    else if (line.startsWith('@@')) cls = 'hunk';
    else if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    pre.append(el('span', `dl dl-${cls}`, line + '\n'));
  }
  return el('div', 'diff-box', k.path ? el('div', 'diff-path', k.path) : null, pre);
}

function drawRaster(k) {
  const rows = k.rows || [];
  const w = Math.max(...rows.map((r) => r.length), 1);
  const canvas = el('canvas', 'raster');
  const cell = 8;
  canvas.width = w * cell;
  canvas.height = rows.length * cell;
  const g = canvas.getContext('2d');
  rows.forEach((row, y) => [...row].forEach((ch, x) => {
    if (ch === ' ') return;
    g.fillStyle = k.palette?.[ch] || '#000';
    g.fillRect(x * cell, y * cell, cell, cell);
  }));
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', k.alt || 'raster picture');
  const legend = k.legend ? el('ul', 'legend', Object.entries(k.legend).map(([ch, what]) => el('li', '', `${ch} ${what}`))) : null;
  return el('figure', 'raster-box', canvas, legend, k.alt ? el('figcaption', '', k.alt) : null);
}

/**
 * drawKind draws one surface kind. emit(event, value) is set for component
 * nodes that declare that event; it sends the committed action.
 */
export function drawKind(k, emit = null) {
  if (!k || typeof k !== 'object') return el('div', 'surface-empty', '');
  switch (k.t) {
    case 'text':
      return el('div', 'k-text', String(k.value ?? ''));
    case 'markdown': {
      const d = el('div', 'k-markdown md');
      d.append(renderMarkdown(k.value));
      return d;
    }
    case 'stream': {
      const text = String(k.value ?? '') + (k.chunks || []).join('');
      return el('pre', 'k-stream', text);
    }
    case 'table': {
      const t = el('table', 'k-table');
      const align = k.align || [];
      const head = el('tr', '', (k.columns || []).map((c, i) => {
        const th = el('th', `al-${align[i] || 'left'}`, c);
        th.scope = 'col';
        return th;
      }));
      const body = el('tbody');
      for (const row of k.rows || []) {
        const tr = el('tr', '', row.map((c, i) => el('td', `al-${align[i] || 'left'}`, String(c ?? ''))));
        if (emit && (emit.has('select') || emit.has('open'))) {
          tr.tabIndex = 0;
          tr.classList.add('actionable');
          const act = (ev) => emit.send(emit.has('select') ? 'select' : 'open', row, ev);
          tr.addEventListener('click', act);
          tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); act(ev); } });
        }
        body.append(tr);
      }
      t.append(el('thead', '', head), body);
      return el('div', 'table-wrap', t);
    }
    case 'tree': {
      const list = (nodes) => el('ul', 'k-tree', (nodes || []).map((n) => {
        const label = el('span', 'tree-label', n.label);
        if (emit && (emit.has('select') || emit.has('open'))) {
          label.tabIndex = 0;
          label.classList.add('actionable');
          const act = (ev) => emit.send(emit.has('select') ? 'select' : 'open', n, ev);
          label.addEventListener('click', act);
          label.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') act(ev); });
        }
        return el('li', '', label, n.children?.length ? list(n.children) : null);
      }));
      return list(k.nodes);
    }
    case 'diff':
      return drawDiff(k);
    case 'progress': {
      const max = k.max ?? 100;
      const p = el('progress');
      p.max = max;
      if (k.value !== undefined) p.value = k.value;
      const pct = k.value !== undefined ? Math.floor((k.value / max) * 100) : null;
      const words = k.value !== undefined ? `${numberText(k.value)}/${numberText(max)} (${pct}%)` : 'in progress';
      p.setAttribute('aria-label', `${k.label || 'progress'} ${words}`);
      return el('div', 'k-progress', k.label ? el('span', 'p-label', k.label) : null, p, el('span', 'p-words', words));
    }
    case 'task':
      return el('div', 'k-task',
        el('div', 'task-head', statusTag(k.status), ' ', el('strong', '', k.title)),
        k.detail ? el('div', 'task-detail', k.detail) : null,
        k.steps?.length ? el('ol', 'task-steps', k.steps.map((s) => el('li', '', statusTag(s.status), ' ', s.title))) : null);
    case 'question':
      return drawQuestion(k, emit);
    case 'form':
      return drawForm(k, emit);
    case 'stack': {
      const d = el('div', `k-stack ${k.direction === 'horizontal' ? 'horizontal' : 'vertical'}`);
      for (const c of k.children || []) d.append(drawKind(c.kind));
      return d;
    }
    case 'chart':
      return drawChart(k);
    case 'raster':
      return drawRaster(k);
    case 'image': {
      const img = el('img', 'k-image');
      if (/^image\/(png|jpeg|gif|webp)$/.test(k.mime) && /^[A-Za-z0-9+/=]*$/.test(k.data || '')) {
        img.src = `data:${k.mime};base64,${k.data}`;
      }
      img.alt = k.alt || '';
      return el('figure', '', img, el('figcaption', '', k.alt || ''));
    }
  }
  return el('div', 'k-unknown', `(a ${String(k.t)} surface this client cannot draw)`);
}

function drawQuestion(k, emit) {
  const box = el('div', 'k-question', el('div', 'q-prompt', k.prompt), k.detail ? el('div', 'q-detail', k.detail) : null);
  const chosen = new Set(k.answer?.choices || []);
  const choices = el('div', 'q-choices');
  for (const c of k.choices || []) {
    const value = c.value ?? c.label;
    const b = button(`${chosen.has(value) ? '● ' : ''}${c.label}`, (ev) => emit?.send('select', [value], ev), 'choice');
    if (chosen.has(value)) b.setAttribute('aria-pressed', 'true');
    b.disabled = !emit?.has('select');
    if (c.detail) b.title = c.detail;
    choices.append(b);
  }
  box.append(choices);
  if (k.allowText && emit?.has('submit')) {
    const input = el('input');
    input.type = 'text';
    input.setAttribute('aria-label', k.prompt);
    box.append(el('div', 'q-text', input, button('Answer', (ev) => emit.send('submit', { text: input.value }, ev))));
  }
  if (k.answer?.text) box.append(el('div', 'q-answer', `Answer: ${k.answer.text}`));
  return box;
}

function drawForm(k, emit) {
  const form = el('form', 'k-form');
  const inputs = [];
  for (const f of k.fields || []) {
    const id = `f-${Math.random().toString(36).slice(2)}`;
    let input;
    switch (f.type) {
      case 'multiline':
        input = el('textarea');
        input.value = f.value ?? '';
        break;
      case 'boolean':
        input = el('input');
        input.type = 'checkbox';
        input.checked = Boolean(f.value);
        break;
      case 'choice':
        input = el('select', '', (f.choices || []).map((c) => { const o = el('option', '', c); o.value = c; return o; }));
        if (f.value !== undefined) input.value = f.value;
        break;
      case 'multichoice':
        input = el('select', '', (f.choices || []).map((c) => {
          const o = el('option', '', c);
          o.value = c;
          o.selected = (f.value || []).includes(c);
          return o;
        }));
        input.multiple = true;
        break;
      default:
        input = el('input');
        input.type = f.type === 'number' ? 'number' : 'text';
        if (f.min !== undefined) input.min = f.min;
        if (f.max !== undefined) input.max = f.max;
        if (f.value !== undefined) input.value = f.value;
    }
    input.id = id;
    input.name = f.name;
    if (f.required) input.required = true;
    if (f.placeholder) input.placeholder = f.placeholder;
    const label = el('label', '', f.label || f.name, f.required ? ' (required)' : '');
    label.htmlFor = id;
    form.append(el('div', 'field', label, input, f.help ? el('div', 'help', f.help) : null));
    inputs.push([f, input]);
  }
  const submit = el('button', 'primary', k.submit || 'Submit');
  submit.type = 'submit';
  submit.disabled = !emit?.has('submit');
  form.append(submit);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const values = {};
    for (const [f, input] of inputs) {
      if (f.type === 'boolean') values[f.name] = input.checked;
      else if (f.type === 'number') values[f.name] = input.value === '' ? null : Number(input.value);
      else if (f.type === 'multichoice') values[f.name] = [...input.selectedOptions].map((o) => o.value);
      else values[f.name] = input.value;
    }
    emit?.send('submit', values, ev);
  });
  return form;
}

/**
 * drawNode draws a component node bound to data. intent(action, value) sends
 * ui.intent for the placed component.
 */
export function drawNode(n, data, intent) {
  if (!n || typeof n !== 'object' || !shown(n, data)) return null;
  const props = { t: n.type };
  for (const [key, v] of Object.entries(n)) {
    if (['type', 'on', 'when', 'children'].includes(key)) continue;
    const [value, ok] = bindProp(v, data);
    if (ok) props[key] = value;
  }
  const on = n.on || {};
  if (n.type === 'button') {
    const label = String(props.label ?? '');
    if (props.href !== undefined) {
      // A link opens only through the host, which checks it; its target
      // is always visible.
      return button(`${label} (${props.href})`, () => intent('open', props.href), 'link-button');
    }
    return button(label, () => on.press && intent(on.press, undefined), 'node-button');
  }
  if (n.type === 'stack') {
    const kids = (n.children || []).map((c) => drawNode(c, data, intent)).filter(Boolean);
    if (kids.length === 0) return el('div', 'k-text', '');
    return el('div', `k-stack ${props.direction === 'horizontal' ? 'horizontal' : 'vertical'}`, kids);
  }
  const emit = {
    has: (event) => Boolean(on[event]),
    send: (event, value) => { if (on[event]) intent(on[event], value); },
  };
  return drawKind(props, emit);
}
