// tetra serve's page: a form whose every change asks the server for tetra plan's JSON and
// draws it; a run of the layout whose step records arrive as server-sent events; the lessons
// of tetra lab. Plain JavaScript: no library, no build step. Every number shown is the
// server's; the page only formats and draws.
'use strict';

const token = new URLSearchParams(location.search).get('token') || '';
const $ = (id) => document.getElementById(id);

// The page's own words (the lessons' texts come from tetra lab's data, in either language).
const WORDS = {
  en: {
    tab_planner: 'Planner', tab_run: 'Run', tab_lessons: 'Lessons',
    model: 'Model', preset: 'preset', custom: '(none)', layout: 'Layout [TP, CP, PP, DP]',
    schedule: 'schedule', batch: 'Batch', global_batch: 'global batch', micro_batch: 'micro-batch (0: auto)',
    training: 'Training and machine', recompute: 'recompute', gpu: 'device',
    fig_memory: 'memory per rank (peak)', fig_bubble: 'pipeline bubble', fig_step: 'step time',
    fig_mfu: 'MFU', fig_ranks: 'ranks',
    of: 'of', fits: 'fits', not_fits: 'does NOT fit', stage: 'stage',
    of_step: 'of the step', formula: 'formula', no_peak: 'no peak for this device',
    tokens_s: 'tokens/s',
    grid_title: 'Rank grid, [TP, CP, PP, DP] order', grid_color: 'colour by group:',
    grid_first: 'the first {n} of {world} ranks', node: 'node',
    memory_title: 'Memory per rank, by pipeline stage',
    timeline_title: 'Schedule (tetra plot --schedule)', traffic_title: 'Traffic per step, a rank of stage 0',
    report_title: 'tetra plan, as text',
    group: 'group', size: 'ranks', bytes: 'bytes', link: 'link', time: 'time',
    weights: 'weights', gradients: 'gradients', adam: 'Adam', activations: 'activations',
    buffers: 'step buffers', other: 'other', capacity: 'capacity',
    coords: 'coordinates', layers: 'layers', tokens: 'tokens of each sequence', groups: 'groups',
    run_intro: 'Train the planner\'s layout for real on this machine\'s CPU cores: one rank first, then the layout on the same model and batch; then the measured bytes, peak memory and bubble beside the plan, and whether every step\'s loss matches one rank\'s.',
    steps: 'steps', run_start: 'Train this layout', run_stop: 'Stop',
    no_token: 'This page was opened without its token: open the address tetra serve printed to start runs.',
    running_ref: 'running the one-rank reference ...', running_layout: 'running the layout on {n} ranks ...',
    done: 'done', stopped: 'stopped', failed: 'failed',
    loss_title: 'Loss per step', split_title: 'Step split (layout): compute, communication, bubble',
    result_title: 'Measured beside planned', planned: 'planned', measured: 'measured', equal: 'equal',
    peak_memory: 'peak memory', bubble: 'bubble', compute: 'compute', comm: 'communication',
    reference: 'one rank', this_layout: 'this layout',
    matches: 'matches one rank', not_matches: 'does NOT match one rank',
    gap: 'largest loss gap {gap}, bound {bound}',
    answer: 'Answer', lesson_run: 'Run it', your_answer: 'your answer', second: 'second answer',
    right: 'Right.', right_try: 'Right on the second try.', wrong: 'Wrong: the formula\'s answer is {f}.',
    mistake: 'Wrong, and a known mistake: {says}', hint: 'Not yet. A hint: {hint}',
    again: 'Try once more.', not_number: 'That is not a number: 3,099,520 or 3.1e6; a share as 0.2, 20% or 1/5.',
    not_share: 'A share of a whole is between 0 and 1, or 0 % and 100 %.',
    as_percent: '(read as {t} %)', run_now: 'Now run it: the layout on this machine\'s cores.',
    lesson_running: 'run {k} of {n}: {label} on {ranks} rank(s) ...', computed: 'computed, no run',
    the_formula: 'the formula', the_measured: 'measured', tetra_plan: 'tetra plan',
    same: 'The run measured exactly what the formula says.', differs: 'The run measured {off} from the formula\'s answer.',
    working: 'The working', code: 'The code',
  },
  zh: {
    tab_planner: '规划', tab_run: '运行', tab_lessons: '课程',
    model: '模型', preset: '预设', custom: '（无）', layout: '布局 [TP, CP, PP, DP]',
    schedule: '调度', batch: '批', global_batch: '全局批', micro_batch: '微批（0：自动）',
    training: '训练与机器', recompute: '重计算', gpu: '设备',
    fig_memory: '每个 rank 的内存（峰值）', fig_bubble: '流水线气泡', fig_step: '每步时间',
    fig_mfu: 'MFU', fig_ranks: 'rank 数',
    of: '／', fits: '放得下', not_fits: '放不下', stage: '阶段',
    of_step: '占每步', formula: '公式', no_peak: '此设备没有峰值',
    tokens_s: 'token/秒',
    grid_title: 'rank 网格，[TP, CP, PP, DP] 顺序', grid_color: '按组着色：',
    grid_first: '前 {n} 个（共 {world} 个）rank', node: '节点',
    memory_title: '每个 rank 的内存，按流水线阶段',
    timeline_title: '调度（tetra plot --schedule）', traffic_title: '每步通信量，阶段 0 的一个 rank',
    report_title: 'tetra plan 的文字输出',
    group: '组', size: 'rank 数', bytes: '字节', link: '链路', time: '时间',
    weights: '权重', gradients: '梯度', adam: 'Adam', activations: '激活',
    buffers: '步内缓冲', other: '其他', capacity: '容量',
    coords: '坐标', layers: '层', tokens: '每个序列的 token', groups: '组',
    run_intro: '在本机的 CPU 核上真正训练规划中的布局：先用一个 rank，再用该布局训练同一个模型和同一批数据；然后把测得的字节数、峰值内存和气泡与规划并列，并检查每一步的损失是否与单 rank 一致。',
    steps: '步数', run_start: '训练这个布局', run_stop: '停止',
    no_token: '打开本页时没有带令牌：请打开 tetra serve 打印的地址再开始运行。',
    running_ref: '正在运行单 rank 参照……', running_layout: '正在用 {n} 个 rank 运行该布局……',
    done: '完成', stopped: '已停止', failed: '失败',
    loss_title: '每步损失', split_title: '每步构成（该布局）：计算、通信、气泡',
    result_title: '测量值与规划并列', planned: '规划', measured: '测量', equal: '相等',
    peak_memory: '峰值内存', bubble: '气泡', compute: '计算', comm: '通信',
    reference: '单 rank', this_layout: '该布局',
    matches: '与单 rank 一致', not_matches: '与单 rank 不一致',
    gap: '最大损失差 {gap}，界限 {bound}',
    answer: '作答', lesson_run: '运行', your_answer: '你的答案', second: '第二次答案',
    right: '答对了。', right_try: '第二次答对了。', wrong: '答错了：公式的答案是 {f}。',
    mistake: '不对，这是一个常见错误：{says}', hint: '还不对。提示：{hint}',
    again: '再试一次。', not_number: '这不是数字：如 3,099,520 或 3.1e6；比例可写 0.2、20% 或 1/5。',
    not_share: '占比应在 0 到 1 之间，或 0 % 到 100 %。',
    as_percent: '（读作 {t} %）', run_now: '现在运行：在本机的核上跑这个布局。',
    lesson_running: '第 {k} 次运行（共 {n} 次）：{label}，{ranks} 个 rank……', computed: '直接计算，不需要运行',
    the_formula: '公式', the_measured: '测量值', tetra_plan: 'tetra plan',
    same: '运行测得的数与公式完全一致。', differs: '运行测得的数与公式相差 {off}。',
    working: '推导', code: '代码',
  },
};

let lang = 'en';
function w(key, values) {
  let s = (WORDS[lang] && WORDS[lang][key]) || WORDS.en[key] || key;
  for (const [k, v] of Object.entries(values || {})) s = s.split('{' + k + '}').join(String(v));
  return s;
}
function applyWords() {
  document.documentElement.lang = lang;
  for (const e of document.querySelectorAll('[data-words]')) e.textContent = w(e.dataset.words);
}

// Numbers as tetra prints them: decimal units with three significant digits.
function bytes(b) {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let u = 0;
  while (Math.abs(b) >= 999.5 && u < 5) { b /= 1000; u++; }
  const a = Math.abs(b);
  return b.toFixed(a >= 99.95 ? 0 : a >= 9.995 ? 1 : 2) + ' ' + units[u];
}
function pct(x) { return (100 * x).toFixed(x >= 0.1 ? 1 : 2) + ' %'; }
function seconds(s) {
  if (s >= 0.1) return s.toFixed(2) + ' s';
  if (s >= 1e-4) return (s * 1e3).toPrecision(3) + ' ms';
  return (s * 1e6).toPrecision(3) + ' us';
}
function commas(x) { return Math.round(x).toLocaleString('en-US'); }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'style') e.style.cssText = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}
function svgEl(tag, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

async function getJson(url) {
  const r = await fetch(url);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
async function postJson(url, data) {
  const r = await fetch(url, {method: 'POST', body: JSON.stringify(data)});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// A POST whose answer is a stream of server-sent events: onEvent(name, data) for each. The
// stream ends when the run does; aborting it (the Stop button, or the page closing) stops the
// run on the server.
async function postEvents(url, data, onEvent, signal) {
  const r = await fetch(url, {method: 'POST', body: JSON.stringify(data), signal,
                              headers: {'X-Tetra-Token': token}});
  if (!r.ok) {
    const body = await r.json();
    throw new Error(body.error || r.statusText);
  }
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    text += decoder.decode(value, {stream: true});
    let end;
    while ((end = text.indexOf('\n\n')) >= 0) {
      const block = text.slice(0, end);
      text = text.slice(end + 2);
      let name = 'message', payload = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) payload += line.slice(6);
      }
      if (payload) onEvent(name, JSON.parse(payload));
    }
  }
}

// ---- the planner ----

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
  const node = grid.node_ranks;
  for (let r = 0; r < n; r++) {
    if (r > 0 && node > 1 && r % node === 0) box.append(el('span', {className: 'node-gap'}));
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

// ---- the run ----

let runAbort = null;

function runDone(words) {
  $('run-start').disabled = false;
  $('run-stop').disabled = true;
  $('run-status').textContent = words;
  runAbort = null;
}

// Loss per step, each phase a line.
function drawLoss(series) {
  const W = 440, H = 220, pad = 36;
  const all = Object.values(series).flat();
  const svg = svgEl('svg', {width: W, height: H, viewBox: `0 0 ${W} ${H}`});
  if (all.length === 0) { $('run-loss').replaceChildren(svg); return; }
  const steps = Math.max(...Object.values(series).map((s) => s.length), 2);
  const lo = Math.min(...all), hi = Math.max(...all), span = hi - lo || 1;
  const x = (i) => pad + ((W - 2 * pad) * i) / (steps - 1);
  const y = (v) => H - pad - ((H - 2 * pad) * (v - lo)) / span;
  svg.append(svgEl('line', {x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, stroke: '#999'}));
  svg.append(svgEl('line', {x1: pad, y1: pad, x2: pad, y2: H - pad, stroke: '#999'}));
  for (const [v, yy] of [[hi, y(hi)], [lo, y(lo)]]) {
    const t = svgEl('text', {x: 2, y: yy + 4, 'font-size': 10});
    t.textContent = v.toFixed(3);
    svg.append(t);
  }
  const colors = {reference: '#999', layout: '#0550ae'};
  let ly = 14;
  for (const [phase, values] of Object.entries(series)) {
    const pts = values.map((v, i) => `${x(i)},${y(v)}`).join(' ');
    svg.append(svgEl('polyline', {points: pts, fill: 'none', stroke: colors[phase], 'stroke-width': phase === 'layout' ? 2 : 3,
                                  'stroke-dasharray': phase === 'layout' ? '' : '5 3', class: `loss-${phase}`}));
    const t = svgEl('text', {x: W - pad - 100, y: ly, 'font-size': 11, fill: colors[phase]});
    t.textContent = w(phase === 'layout' ? 'this_layout' : 'reference');
    svg.append(t);
    ly += 14;
  }
  $('run-loss').replaceChildren(svg);
}

// A step record's split: the ranks' mean compute, the bubble (of the step), communication
// besides; as the sweep splits a step.
function split(record, interleaved) {
  const c = record.compute_ms.reduce((a, b) => a + b, 0) / record.compute_ms.length / record.step_ms;
  let b = interleaved ? record.bubble / (1 + record.bubble) : record.bubble;
  b = Math.min(b, 1 - c);
  return {compute: c, comm: Math.max(0, 1 - c - b), bubble: b};
}

function drawSplit(records, interleaved) {
  const W = 440, row = 16, H = Math.max(40, records.length * (row + 4) + 30);
  const svg = svgEl('svg', {width: W, height: H, viewBox: `0 0 ${W} ${H}`});
  const colors = {compute: '#59a14f', comm: '#4e79a7', bubble: '#e15759'};
  records.forEach((r, i) => {
    const s = split(r, interleaved);
    let x = 50;
    const label = svgEl('text', {x: 0, y: 14 + i * (row + 4), 'font-size': 10});
    label.textContent = `${r.step}: ${r.step_ms.toFixed(0)} ms`;
    svg.append(label);
    for (const k of ['compute', 'comm', 'bubble']) {
      const width = (W - 60) * s[k];
      svg.append(svgEl('rect', {x, y: 3 + i * (row + 4), width: Math.max(0, width), height: row, fill: colors[k], class: `split-${k}`}));
      x += width;
    }
  });
  let lx = 50;
  for (const k of ['compute', 'comm', 'bubble']) {
    svg.append(svgEl('rect', {x: lx, y: H - 14, width: 10, height: 10, fill: colors[k]}));
    const t = svgEl('text', {x: lx + 14, y: H - 5, 'font-size': 11});
    t.textContent = w(k);
    svg.append(t);
    lx += 110;
  }
  $('run-split').replaceChildren(svg);
}

function drawResult(result) {
  const t = $('run-result');
  t.replaceChildren(el('tr', {}, el('th', {textContent: ''}), el('th', {textContent: w('planned')}),
                        el('th', {textContent: w('measured')}), el('th', {textContent: w('equal')})));
  for (const [group, b] of Object.entries(result.comm_bytes)) {
    if (b.planned === 0 && (b.measured || 0) === 0) continue;
    t.append(el('tr', {className: 'bytes-row', 'data-group': group, 'data-planned': String(b.planned),
                       'data-measured': String(b.measured)},
                el('td', {textContent: `${group} ${w('bytes')}`}),
                el('td', {textContent: commas(b.planned)}), el('td', {textContent: commas(b.measured)}),
                el('td', {textContent: b.planned === b.measured ? '=' : '≠'})));
  }
  const pm = result.peak_memory_bytes;
  t.append(el('tr', {'data-row': 'peak', 'data-planned': String(pm.planned), 'data-measured': String(pm.measured)},
              el('td', {textContent: w('peak_memory')}), el('td', {textContent: bytes(pm.planned)}),
              el('td', {textContent: bytes(pm.measured)}),
              el('td', {textContent: `${((100 * (pm.measured - pm.planned)) / pm.planned).toFixed(1)} %`})));
  t.append(el('tr', {'data-row': 'bubble'}, el('td', {textContent: w('bubble')}),
              el('td', {textContent: `${pct(result.bubble_formula)} (${w('formula')})`}),
              el('td', {textContent: pct(result.bubble)}), el('td', {textContent: ''})));
  const v = $('run-match');
  const good = result.matches === true;
  v.className = 'verdict ' + (good ? 'good' : 'bad');
  v.textContent = result.matches === undefined ? `${w('failed')}: ${result.error || result.status}`
    : `${good ? w('matches') : w('not_matches')} (${w('gap', {gap: Number(result.loss_gap).toExponential(1), bound: Number(result.bounds.loss).toExponential(0)})})`;
  v.dataset.matches = String(good);
}

async function startRun() {
  if (!token) { $('run-status').textContent = w('no_token'); return; }
  const series = {reference: [], layout: []};
  const layoutRecords = [];
  const interleaved = lastPlan && lastPlan.plan.bubble.schedule === 'interleaved';
  $('run-result').replaceChildren();
  $('run-match').textContent = '';
  $('run-match').dataset.matches = '';
  drawLoss(series);
  drawSplit([], false);
  $('run-start').disabled = true;
  $('run-stop').disabled = false;
  runAbort = new AbortController();
  let final = w('done');
  try {
    await postEvents('/api/run', {settings: collect(false), steps: Number($('run-steps').value)}, (name, data) => {
      if (name === 'start') {
        $('run-command').textContent = data.command;
        $('run-status').textContent = w('running_ref');
      } else if (name === 'phase' && data.phase === 'layout') {
        $('run-status').textContent = w('running_layout', {n: data.ranks});
      } else if (name === 'step') {
        series[data.phase].push(data.record.loss);
        drawLoss(series);
        if (data.phase === 'layout') {
          layoutRecords.push(data.record);
          drawSplit(layoutRecords, interleaved);
        }
      } else if (name === 'result') {
        drawResult(data);
      } else if (name === 'error') {
        final = `${w('failed')}: ${data.error}`;
      }
    }, runAbort.signal);
  } catch (e) {
    final = e.name === 'AbortError' ? w('stopped') : `${w('failed')}: ${e.message}`;
  }
  runDone(final);
}

// ---- the lessons ----

let lesson = null, tries = [];

async function loadLessons() {
  const list = await getJson(`/api/lessons?lang=${lang}`);
  const ol = $('lesson-list');
  ol.replaceChildren();
  for (const l of list.lessons) {
    const b = el('button', {textContent: `${l.name}: ${l.title}`, 'data-lesson': l.name});
    b.onclick = () => openLesson(l.name);
    ol.append(el('li', {}, b));
  }
  if (lesson) openLesson(lesson.name, true);
}

async function openLesson(name, keepTries) {
  lesson = await getJson(`/api/lesson?name=${encodeURIComponent(name)}&lang=${lang}`);
  if (!keepTries) tries = [];
  for (const b of document.querySelectorAll('#lesson-list button'))
    b.classList.toggle('active', b.dataset.lesson === name);
  $('lesson').hidden = false;
  $('lesson-title').textContent = `${lesson.number}. ${lesson.title}`;
  $('lesson-idea').textContent = lesson.idea;
  $('lesson-question').textContent = lesson.question;
  if (!keepTries) {
    $('lesson-answer').value = '';
    $('lesson-feedback').textContent = '';
    $('lesson-result').replaceChildren();
    $('lesson-submit').disabled = false;
    $('lesson-run').hidden = true;
  }
}

async function submitAnswer() {
  const text = $('lesson-answer').value;
  const a = await postJson('/api/answer', {lesson: lesson.name, lang, answer: text});
  const fb = $('lesson-feedback');
  if (a.reading === 'not_number' || a.reading === 'not_share') {
    fb.textContent = w(a.reading);
    return;
  }
  tries.push(text);
  const read = a.reading === 'as_percent' ? ' ' + w('as_percent', {t: text}) : '';
  let says = a.right ? (tries.length > 1 ? w('right_try') : w('right'))
    : a.mistake ? w('mistake', {says: a.mistake.says}) : w('hint', {hint: a.hint});
  const done = a.right || tries.length === 2;
  if (!done) says += ' ' + w('again');
  else says += ' ' + w('run_now');
  fb.textContent = `${w('your_answer')}: ${a.shown}${read}. ${says}`;
  fb.dataset.right = String(a.right);
  if (done) {
    $('lesson-submit').disabled = true;
    $('lesson-run').hidden = false;
  } else {
    $('lesson-answer').value = '';
  }
}

async function runLesson() {
  if (!token) { $('lesson-feedback').textContent = w('no_token'); return; }
  $('lesson-run').disabled = true;
  const out = $('lesson-result');
  out.replaceChildren();
  const status = el('p', {className: 'info'});
  out.append(status);
  try {
    await postEvents('/api/lesson/run', {lesson: lesson.name, lang, answers: tries}, (name, data) => {
      if (name === 'run') status.textContent = w('lesson_running', {k: data.run, n: data.of, label: data.label, ranks: data.ranks});
      else if (name === 'ran') status.textContent += ` ${data.seconds.toFixed(1)} s`;
      else if (name === 'error') status.textContent = `${w('failed')}: ${data.error}`;
      else if (name === 'result') showLessonResult(data, status);
    });
  } catch (e) {
    status.textContent = `${w('failed')}: ${e.message}`;
  }
  $('lesson-run').disabled = false;
}

function showLessonResult(r, status) {
  status.textContent = r.computed ? `${w('computed')}: ${r.source}` : '';
  const t = el('table', {id: 'lesson-table'});
  r.answers.forEach((a, i) => t.append(el('tr', {}, el('td', {textContent: i === 0 ? w('your_answer') : w('second')}), el('td', {textContent: a}))));
  t.append(el('tr', {}, el('td', {textContent: w('the_formula')}), el('td', {textContent: r.formula})));
  t.append(el('tr', {'data-row': 'measured'}, el('td', {textContent: r.computed ? w('tetra_plan') : w('the_measured')}),
              el('td', {textContent: r.measured + (r.computed ? '' : ` (${r.source})`)})));
  const grade = el('p', {className: 'verdict ' + (r.right ? 'good' : 'bad'),
                         textContent: r.right ? (r.answers.length > 1 ? w('right_try') : w('right')) : w('wrong', {f: r.formula})});
  const parts = [t, grade];
  if (!r.computed) parts.push(el('p', {textContent: r.same ? w('same') : w('differs', {off: r.measured_off})}));
  for (const n of r.notes) parts.push(el('p', {className: 'prose', textContent: n}));
  if (r.ring_bytes) parts.push(el('p', {className: 'note', textContent: r.ring_bytes}));
  parts.push(el('h3', {textContent: w('working')}), el('p', {className: 'prose', textContent: r.working}));
  parts.push(el('h3', {textContent: w('code')}),
             el('ul', {}, ...r.code.map((c) => el('li', {}, el('code', {textContent: c.file}), ': ' + c.function))));
  $('lesson-result').append(...parts);
}

// ---- the page ----

function showTab(name) {
  for (const s of document.querySelectorAll('.page')) s.hidden = s.id !== name;
  for (const b of document.querySelectorAll('.tab')) b.classList.toggle('active', b.dataset.tab === name);
  if (name === 'lessons' && !$('lesson-list').children.length) loadLessons();
}

async function start() {
  lang = localStorage.getItem('tetra-lang') || (navigator.language.startsWith('zh') ? 'zh' : 'en');
  $('lang').value = lang;
  applyWords();
  options = await getJson('/api/options');
  fillChoices();
  setInputs(options.settings);
  $('run-steps').max = options.limits.max_steps;
  for (const e of inputs())
    e.addEventListener(e.tagName === 'SELECT' || e.type === 'checkbox' ? 'change' : 'input',
                       () => schedulePlan(e.dataset.key === 'run.preset'));
  $('settings').addEventListener('submit', (e) => e.preventDefault());
  $('grid-group').onchange = () => lastPlan && drawGrid(lastPlan.plan.grid);
  for (const b of document.querySelectorAll('.tab')) b.onclick = () => showTab(b.dataset.tab);
  $('run-start').onclick = startRun;
  $('run-stop').onclick = () => runAbort && runAbort.abort();
  $('lesson-submit').onclick = submitAnswer;
  $('lesson-answer').addEventListener('keydown', (e) => { if (e.key === 'Enter') submitAnswer(); });
  $('lesson-run').onclick = runLesson;
  $('lang').onchange = () => {
    lang = $('lang').value;
    localStorage.setItem('tetra-lang', lang);
    applyWords();
    fillChoices();
    if (lastPlan) { setInputs(lastPlan.settings); drawPlan(lastPlan); }
    if ($('lesson-list').children.length) loadLessons();
  };
  showTab('planner');
  await plan(true);
}

start();
