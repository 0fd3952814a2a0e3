// tetra serve's page: the helpers every tab uses (words, numbers as tetra prints them,
// elements, the API's JSON and event streams), the tabs, and the start.
'use strict';

const token = new URLSearchParams(location.search).get('token') || '';
const $ = (id) => document.getElementById(id);

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

// After every script of the page has run (they are deferred, in order).
document.addEventListener('DOMContentLoaded', start);
