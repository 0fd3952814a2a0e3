// The planner: a form whose every change asks the server for tetra plan's JSON, and its
// drawing: the figures, the rank grid, memory per stage, the timeline, the traffic.
'use strict';

let options = null, lastPlan = null, planSeq = 0, planTimer = null;

function inputs() { return document.querySelectorAll('#settings [data-key]'); }

function fillChoices() {
  for (const e of inputs()) {
    const choices = options.choices[e.dataset.key];
    if (!choices || e.tagName !== 'SELECT') continue;
    e.replaceChildren();
    if (e.dataset.key === 'run.preset') e.append(el('option', {value: '', textContent: w('custom')}));
    for (const c of choices) e.append(el('option', {value: c, textContent: c}));
  }
}

function setInputs(settings) {
  for (const e of inputs()) {
    const [section, name] = e.dataset.key.split('.');
    const v = settings[section] ? settings[section][name] : undefined;
    if (v === undefined) continue;
    if (e.type === 'checkbox') e.checked = !!v;
    else e.value = String(v);
  }
}

// The form as the API's settings; with `presetOnly`, the preset alone (it fills the rest).
function collect(presetOnly) {
  const s = {};
  for (const e of inputs()) {
    const [section, name] = e.dataset.key.split('.');
    let v;
    if (e.type === 'checkbox') v = e.checked;
    else if (e.type === 'number') {
      if (e.value === '') continue;
      v = Number(e.value);
    } else v = e.value;
    if (e.dataset.key === 'run.preset' && v === '') continue;
    if (presetOnly && e.dataset.key !== 'run.preset') continue;
    (s[section] = s[section] || {})[name] = v;
  }
  return s;
}

function schedulePlan(presetOnly) {
  clearTimeout(planTimer);
  planTimer = setTimeout(() => plan(presetOnly), 120);
}

async function plan(presetOnly) {
  const seq = ++planSeq;
  let res;
  try {
    res = await postJson('/api/plan', {settings: collect(presetOnly)});
  } catch (e) {
    if (seq !== planSeq) return;
    $('plan-error').textContent = e.message;
    $('plan-error').hidden = false;
    $('plan-view').classList.add('stale');
    return;
  }
  if (seq !== planSeq) return;
  $('plan-error').hidden = true;
  $('plan-view').classList.remove('stale');
  lastPlan = res;
  setInputs(res.settings);
  $('plan-command').textContent = res.command;
  drawPlan(res);
  document.body.dataset.plans = String(Number(document.body.dataset.plans || 0) + 1);
}

function figure(id, text, note, value, bad) {
  $(id).textContent = text;
  $(id).dataset.value = String(value);
  $(id + '-note').textContent = note;
  $(id).parentElement.classList.toggle('bad', !!bad);
}

function drawPlan(res) {
  const p = res.plan;
  const mem = p.memory;
  figure('fig-memory', bytes(mem.peak_bytes),
         `${w('of')} ${bytes(mem.capacity_bytes)}, ${w('stage')} ${mem.fullest_stage}: ${mem.fits ? w('fits') : w('not_fits')}`,
         mem.peak_bytes, !mem.fits);
  figure('fig-bubble', pct(p.bubble.of_step),
         `${w('of_step')} (${p.bubble.schedule}, PP ${p.bubble.pp}, V ${p.bubble.vpp}, m ${p.bubble.micro_batches})`,
         p.bubble.of_step);
  const st = p.step;
  figure('fig-step', st.known ? seconds(st.step_s) : '-',
         st.known ? `${commas(st.tokens_per_s)} ${w('tokens_s')}` : w('no_peak'), st.known ? st.step_s : '');
  figure('fig-mfu', st.known ? pct(st.mfu) : '-', st.known ? `HFU ${pct(st.hfu)}` : '', st.known ? st.mfu : '');
  figure('fig-ranks', commas(p.grid.world), `${p.run.layout_text} x ${p.machine.name}`, p.grid.world);
  drawGrid(p.grid);
  drawMemory(mem);
  const t = res.timeline;
  $('timeline').replaceChildren();
  if (t.svg) $('timeline').innerHTML = t.svg;  // tetra's own SVG (plot/svg_schedule.cpp)
  else $('timeline').append(el('p', {className: 'note', textContent: t.note}));
  drawTraffic(p.traffic);
  $('report').textContent = res.report || '';
  $('run-layout').textContent = `${p.run.layout_text}, ZeRO-${p.run.zero}, ${p.run.dtype}: ${commas(p.grid.world)} ranks`;
}

const MAX_CELLS = 256;
const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
                 '#ff9da7', '#9c755f', '#7f8c8d', '#2f4b7c', '#a05195', '#d45087', '#665191'];

// A rank's coordinates from the grid's strides, and the first rank of each of its groups.
function coordsOf(grid, r) {
  const c = {};
  for (const d of grid.dims) c[d.name] = Math.floor(r / d.stride) % d.size;
  return c;
}
function groupMembers(grid, r, name) {
  const d = grid.dims.find((x) => x.name === name);
  const first = r - coordsOf(grid, r)[name] * d.stride;
  const out = [];
  for (let i = 0; i < d.size; i++) out.push(first + i * d.stride);
  return out;
}
function shortList(list) {
  return list.length <= 8 ? list.join(', ') : list.slice(0, 4).join(', ') + ', ... ' + list[list.length - 1];
}

function drawGrid(grid) {
  const by = $('grid-group').value;
  const n = Math.min(grid.world, MAX_CELLS);
  $('grid-note').textContent = grid.world > n ? w('grid_first', {n: commas(n), world: commas(grid.world)}) : '';
  const box = $('grid');
  box.replaceChildren();
  // Two nodes a row (16 ranks where a node has one), a gap between the nodes.
  const node = grid.node_ranks, row = node > 1 ? 2 * node : 16;
  for (let r = 0; r < n; r++) {
    if (r > 0 && r % row === 0) box.append(el('span', {className: 'row-end'}));
    else if (r > 0 && node > 1 && r % node === 0) box.append(el('span', {className: 'node-gap'}));
    const first = groupMembers(grid, r, by)[0];
    // Ranks of one group share a colour: the group's index among the groups of that dimension.
    const d = grid.dims.find((x) => x.name === by);
    const index = Math.floor(first / (d.stride * d.size)) * d.stride + (first % d.stride);
    const cell = el('span', {className: 'rank', textContent: String(r), tabIndex: 0,
                             style: `background:${PALETTE[index % PALETTE.length]}`,
                             'data-rank': String(r)});
    cell.onmouseenter = cell.onfocus = () => showRank(grid, r, cell);
    box.append(cell);
  }
}

function showRank(grid, r, cell) {
  for (const c of document.querySelectorAll('.rank.selected')) c.classList.remove('selected');
  cell.classList.add('selected');
  const c = coordsOf(grid, r);
  const stage = grid.stages[c.pp];
  const cpRank = grid.cp_ranks.find((x) => x.cp_rank === c.cp);
  const groups = grid.dims.filter((d) => d.size > 1)
    .map((d) => `${d.name} {${shortList(groupMembers(grid, r, d.name))}}`).join('; ');
  $('rank-info').textContent =
    `rank ${r}: ${w('coords')} tp ${c.tp}, cp ${c.cp}, pp ${c.pp}, dp ${c.dp}; ` +
    `${w('layers')} ${stage ? stage.label : '-'}; ` +
    `${w('tokens')} ${cpRank ? cpRank.label : '-'}; ${w('groups')}: ${groups || '-'}`;
}

const PARTS = [['weights', '#4e79a7'], ['gradients', '#f28e2b'], ['adam', '#59a14f'],
               ['activations', '#e15759'], ['buffers', '#b07aa1'], ['other', '#9c755f']];

function drawMemory(mem) {
  const stages = mem.stages.slice(0, 64);
  const top = Math.max(mem.capacity_bytes, ...stages.map((s) => s.peak)) * 1.05;
  const height = 200;
  const bars = el('div', {className: 'bars'});
  for (const s of stages) {
    const bar = el('div', {className: 'bar', title: `${w('stage')} ${s.stage}: ${bytes(s.peak)}`,
                           'data-stage': String(s.stage), 'data-peak': String(s.peak)});
    for (const [part, color] of PARTS)
      bar.append(el('span', {style: `height:${(height * s[part]) / top}px;background:${color}`,
                             title: `${w(part)} ${bytes(s[part])}`}));
    bars.append(bar);
  }
  bars.append(el('div', {className: 'capacity', style: `bottom:${(height * mem.capacity_bytes) / top}px`,
                         title: `${w('capacity')} ${bytes(mem.capacity_bytes)}`}));
  const labels = el('div', {className: 'bars-labels', style: 'display:flex;gap:6px'});
  for (const s of stages) labels.append(el('span', {className: 'bar-label', textContent: String(s.stage)}));
  const legend = el('div', {className: 'legend'});
  for (const [part, color] of PARTS)
    legend.append(el('span', {}, el('i', {style: `background:${color}`}), w(part)));
  legend.append(el('span', {}, el('i', {style: 'background:#a40e26'}), `${w('capacity')} ${bytes(mem.capacity_bytes)}`));
  $('memory').replaceChildren(bars, labels, legend);
  $('memory-note').textContent = mem.fullest_why || '';
}

function drawTraffic(traffic) {
  const t = $('traffic');
  t.replaceChildren(el('tr', {}, ...['group', 'size', 'bytes', 'link', 'time'].map((k) => el('th', {textContent: w(k)}))));
  for (const g of traffic.groups) {
    if (g.bytes === 0) continue;
    t.append(el('tr', {'data-group': g.group, 'data-bytes': String(g.bytes)},
                el('td', {textContent: g.group}), el('td', {textContent: String(g.size)}),
                el('td', {textContent: `${bytes(g.bytes)} (${commas(g.bytes)} B)`}),
                el('td', {textContent: g.link}), el('td', {textContent: seconds(g.seconds)})));
  }
}
