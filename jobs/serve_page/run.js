// A run of the planner's layout on this machine's CPU ranks: its step records arrive as
// server-sent events; the loss curves, the step split, and at the end measured beside planned.
'use strict';

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

// A step record's split: the ranks' mean compute, the bubble (the record's, a share of the
// step for every schedule), communication besides; as the sweep splits a step.
function split(record) {
  const c = record.compute_ms.reduce((a, b) => a + b, 0) / record.compute_ms.length / record.step_ms;
  const b = Math.min(record.bubble, 1 - c);
  return {compute: c, comm: Math.max(0, 1 - c - b), bubble: b};
}

function drawSplit(records) {
  const W = 440, row = 16, H = Math.max(40, records.length * (row + 4) + 30);
  const svg = svgEl('svg', {width: W, height: H, viewBox: `0 0 ${W} ${H}`});
  const colors = {compute: '#59a14f', comm: '#4e79a7', bubble: '#e15759'};
  records.forEach((r, i) => {
    const s = split(r);
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
  $('run-result').replaceChildren();
  $('run-match').textContent = '';
  $('run-match').dataset.matches = '';
  drawLoss(series);
  drawSplit([]);
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
          drawSplit(layoutRecords);
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
