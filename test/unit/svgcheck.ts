import assert from 'node:assert/strict';

/** Asserts that `text` is one well-formed <svg> element: balanced tags, quoted attributes, escaped text. */
export function assertWellFormedSvg(text: string, what = 'svg'): void {
  const t = text.trim();
  assert.ok(t.startsWith('<svg ') && t.endsWith('</svg>'), `${what}: one <svg> element`);
  assert.match(t, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/, `${what}: SVG namespace`);
  const stack: string[] = [];
  const tag = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/y;
  let i = 0;
  while (i < t.length) {
    const lt = t.indexOf('<', i);
    const textPart = t.slice(i, lt < 0 ? t.length : lt);
    assert.ok(!/[<>]|&(?!(amp|lt|gt|quot|#\d+);)/.test(textPart), `${what}: unescaped text ${JSON.stringify(textPart.slice(0, 60))}`);
    if (lt < 0) break;
    tag.lastIndex = lt;
    const m = tag.exec(t);
    assert.ok(m, `${what}: malformed tag at ${lt}: ${JSON.stringify(t.slice(lt, lt + 80))}`);
    const [, close, name, , self] = m;
    if (close) assert.equal(stack.pop(), name, `${what}: </${name}> closes another element`);
    else if (!self) stack.push(name);
    i = tag.lastIndex;
  }
  assert.deepEqual(stack, [], `${what}: unclosed ${stack.join(', ')}`);
}
