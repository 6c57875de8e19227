#!/usr/bin/env node
// SPDX-License-Identifier: LGPL-2.1-or-later
// gst-npu cross-check: turns a Hugging Face tokenizer (tokenizer.json +
// tokenizer_config.json) into a GGUF holding only tokenizer.ggml.* metadata,
// with the values llama.cpp's convert_hf_to_gguf.py writes, so that real
// vocabularies can be tokenized by llama.cpp and by the core without Python.
// npu-model-gen --tokenizer then builds a loadable model around it.
//
//   node hf-tokenizer-gguf.js DIR OUT.gguf [--pre NAME] [--vocab-size N]
//       [--bos-id N] [--eos-id N] [--scores converter|rank]
//
// DIR holds tokenizer.json and tokenizer_config.json.  --pre is the
// tokenizer.ggml.pre that convert_hf_to_gguf.py would detect by hashing a
// test string with the tokenizer (we cannot run it here), --vocab-size,
// --bos-id and --eos-id stand for the model's config.json (vocab_size and
// the fallback *_token_id).  Ported from the converter:
//  - a BPE model with byte_fallback and a Sequence decoder (Llama 2) is
//    SentencePiece ("llama"), as LlamaHfVocab: every score -1000.0, <0xNN>
//    BYTE, the tokenizer's special tokens CONTROL, the rest NORMAL;
//  - any other BPE is "gpt2", as get_vocab_base(): ids missing up to the
//    vocabulary size are "[PADn]" UNUSED, added tokens CONTROL when special
//    or looking special (<|...|>), else USER_DEFINED; merges given as pairs
//    are joined with a space, spaces inside encoded as U+0120;
//  - SpecialVocab: bos/eos/unk/sep/pad/cls/mask ids by the names in
//    tokenizer_config.json, add_bos/add_eos from it and from a
//    TemplateProcessing post-processor (the simple cases).
// --scores rank (SentencePiece only) replaces the converter's -1000.0, with
// which every merge ties and the left-most pair wins, by -(rank) of the
// NORMAL tokens in id order (0 for the others): the order of the scores in
// the SentencePiece model that tokenizer.json was converted from, whose
// merges transformers sorts by piece id; so that the check also covers
// merging by score, as in GGUFs converted from tokenizer.model.
// Added tokens are not re-normalised (the converter encodes and decodes
// them with transformers; that is the identity for these vocabularies).
'use strict';
const fs = require('fs');
const path = require('path');

function usage() {
  console.error('usage: hf-tokenizer-gguf.js DIR OUT.gguf [--pre NAME] ' +
      '[--vocab-size N] [--bos-id N] [--eos-id N] ' +
      '[--scores converter|rank]');
  process.exit(2);
}

const argv = process.argv.slice(2);
const opt = {};
const pos = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i].startsWith('--')) {
    if (i + 1 >= argv.length) usage();
    opt[argv[i].slice(2)] = argv[++i];
  } else {
    pos.push(argv[i]);
  }
}
if (pos.length !== 2) usage();
const [dir, out] = pos;
const tj = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'),
    'utf8'));
const cfgPath = path.join(dir, 'tokenizer_config.json');
const cfg = fs.existsSync(cfgPath) ?
    JSON.parse(fs.readFileSync(cfgPath, 'utf8')) : {};
const model = tj.model;
if (model.type !== 'BPE') {
  console.error(`model type ${model.type} is not handled`);
  process.exit(1);
}

const added = tj.added_tokens || [];
const byId = new Map();
for (const [t, id] of Object.entries(model.vocab)) byId.set(id, t);
for (const a of added) byId.set(a.id, a.content);
const addedById = new Map(added.map((a) => [a.id, a]));
const nameOf = (e) => typeof e === 'string' ? e :
    (e && typeof e.content === 'string' ? e.content : null);
const specialTypes = ['bos', 'eos', 'unk', 'sep', 'pad', 'cls', 'mask'];

const TT = { NORMAL: 1, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 };
const tokens = [];
const types = [];
let scores = null;
let merges = null;
let kind;

const isSpm = model.byte_fallback === true && tj.decoder &&
    tj.decoder.type === 'Sequence';
if (isSpm) {
  // LlamaHfVocab: the base vocabulary (the model's), then added tokens
  // beyond it; CONTROL = transformers' all_special_ids
  kind = 'llama';
  const special = new Set();
  for (const t of specialTypes) {
    const n = nameOf(cfg[`${t}_token`]);
    if (n !== null) special.add(n);
  }
  for (const n of cfg.additional_special_tokens || []) special.add(nameOf(n));
  const nBase = Object.keys(model.vocab).length;
  const rank = opt.scores === 'rank';
  let k = 0;
  scores = [];
  for (let id = 0; id < nBase; id++) {
    const t = byId.get(id);
    const tt = /^<0x[0-9A-Fa-f]{2}>$/.test(t) ? TT.BYTE :
        special.has(t) ? TT.CONTROL : TT.NORMAL;
    tokens.push(t);
    types.push(tt);
    scores.push(!rank ? -1000.0 : tt === TT.NORMAL ? -(k++) : 0.0);
  }
  for (const a of added.filter((a) => a.id >= nBase)
      .sort((x, y) => x.id - y.id)) {
    tokens.push(a.content);
    scores.push(-1000.0);
    types.push(special.has(a.content) ? TT.CONTROL : TT.USER_DEFINED);
  }
} else {
  kind = 'gpt2';
  const looksSpecial = (t) => ['<pad>', '<mask>', '<2mass>', '[@BOS@]']
      .includes(t) || (t.startsWith('<|') && t.endsWith('|>')) ||
      (t.startsWith('<\uff5c') && t.endsWith('\uff5c>')) ||
      (t.startsWith('<unused') && t.endsWith('>'));
  let n = 0;
  for (const id of byId.keys()) n = Math.max(n, id + 1);
  const size = opt['vocab-size'] ? Number(opt['vocab-size']) : n;
  if (size < n) {
    console.error(`--vocab-size ${size} is below the highest id + 1 (${n})`);
    process.exit(1);
  }
  for (let id = 0; id < size; id++) {
    let t = byId.get(id);
    if (t === undefined) {
      tokens.push(`[PAD${id}]`);
      types.push(TT.UNUSED);
    } else if (addedById.has(id)) {
      const a = addedById.get(id);
      if (a.special || looksSpecial(t)) {
        types.push(TT.CONTROL);
      } else {
        t = t.replace(/\u2581/g, ' ');
        types.push(TT.USER_DEFINED);
      }
      tokens.push(t);
    } else {
      tokens.push(t);
      types.push(TT.NORMAL);
    }
  }
  merges = model.merges.map((m) => typeof m === 'string' ? m :
      m.map((p) => p.replace(/ /g, '\u0120')).join(' '));
}

// SpecialVocab: ids by name, then config.json's (--bos-id, --eos-id)
const ids = {};
const add = {};
for (const t of specialTypes) {
  const n = nameOf(cfg[`${t}_token`]);
  if (typeof cfg[`add_${t}_token`] === 'boolean')
    add[t] = cfg[`add_${t}_token`];
  if (n === null) continue;
  const a = added.find((x) => x.content === n);
  if (a && (!isSpm || a.id < tokens.length)) ids[t] = a.id;
}
if (opt['bos-id'] !== undefined && ids.bos === undefined)
  ids.bos = Number(opt['bos-id']);
if (opt['eos-id'] !== undefined && ids.eos === undefined)
  ids.eos = Number(opt['eos-id']);
const pp = tj.post_processor;
for (const p of pp ? (pp.processors || [pp]) : []) {
  if (p.type !== 'TemplateProcessing' || (p.single || []).length < 2)
    continue;
  const first = p.single[0].SpecialToken && p.single[0].SpecialToken.id;
  const last = p.single[p.single.length - 1].SpecialToken &&
      p.single[p.single.length - 1].SpecialToken.id;
  if (first) add.bos = first === nameOf(cfg.bos_token);
  if (last) add.eos = last === nameOf(cfg.eos_token);
}
// the file's values win over the template, as in SpecialVocab._load()
for (const t of ['bos', 'eos'])
  if (typeof cfg[`add_${t}_token`] === 'boolean')
    add[t] = cfg[`add_${t}_token`];

// GGUF v3 with key/values only
const chunks = [];
const u32 = (v) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
};
const u64 = (v) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b;
};
const str = (s) => { const b = Buffer.from(s, 'utf8');
  return Buffer.concat([u64(b.length), b]); };
const T = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9 };
let nKv = 0;
function kv(key, type, payload) {
  chunks.push(str(key), u32(type), payload);
  nKv++;
}
function arr(elemType, items, enc) {
  return Buffer.concat([u32(elemType), u64(items.length), ...items.map(enc)]);
}
kv('tokenizer.ggml.model', T.STRING, str(kind));
kv('tokenizer.ggml.pre', T.STRING, str(opt.pre || 'default'));
kv('tokenizer.ggml.tokens', T.ARRAY, arr(T.STRING, tokens, str));
if (scores)
  kv('tokenizer.ggml.scores', T.ARRAY, arr(T.FLOAT32, scores, (v) => {
    const b = Buffer.alloc(4); b.writeFloatLE(v); return b; }));
kv('tokenizer.ggml.token_type', T.ARRAY, arr(T.INT32, types, (v) => {
  const b = Buffer.alloc(4); b.writeInt32LE(v); return b; }));
if (merges)
  kv('tokenizer.ggml.merges', T.ARRAY, arr(T.STRING, merges, str));
const keyName = { unk: 'unknown', sep: 'seperator', pad: 'padding' };
for (const [t, id] of Object.entries(ids))
  kv(`tokenizer.ggml.${keyName[t] || t}_token_id`, T.UINT32, u32(id));
for (const [t, v] of Object.entries(add))
  if (t === 'bos' || t === 'eos')
    kv(`tokenizer.ggml.add_${t}_token`, T.BOOL, Buffer.from([v ? 1 : 0]));

const header = Buffer.concat([Buffer.from('GGUF'), u32(3), u64(0),
  u64(nKv)]);
fs.writeFileSync(out, Buffer.concat([header, ...chunks]));
console.log(`${out}: ${kind}, pre ${opt.pre || 'default'}, ` +
    `${tokens.length} tokens, ${merges ? merges.length : 0} merges, ` +
    `ids ${JSON.stringify(ids)}, add ${JSON.stringify(add)}`);
