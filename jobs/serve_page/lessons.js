// The lessons of tetra lab: question, answer (diagnosed), run, measured beside the formula,
// the working and the code.
'use strict';

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
  fb.textContent = w('feedback', {label: w('your_answer'), shown: a.shown, read, says});
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
