// SPDX-License-Identifier: LGPL-2.1-or-later
// gst-npu cross-check: one sound and a prompt through llama.cpp, greedy,
// as llama-mtmd-cli --audio answers it, for an encoder with a short window
//
//   mtmd-audio-caption -m TEXT.gguf --mmproj MMPROJ.gguf --audio FILE.wav
//       -p "What do you hear?" [-n MAX_TOKENS] [--frames N] [--bare]
//
// llama-mtmd-cli cannot run the trained audio encoder of tests/models/:
// mtmd's Whisper preprocessing always makes 30 s windows (3000 mel
// frames, 1500 positions), and the encoder's position table has the 50
// rows of its 1 s window, so clip.cpp's graph aborts
// ("position_embeddings->ne[1] >= n_pos").  npuaudiotok clamps its chunks
// to what the file takes.  This program does what llama-mtmd-cli does
// with llama.cpp's own code at every step but that window: the WAV
// decoded by mtmd's helper (miniaudio, to 16 kHz mono float), the log-mel
// of mtmd_audio_preprocessor_whisper (mtmd-audio.cpp), of which the first
// --frames (100: 1 s) are kept, clip_image_batch_encode() (encoder and
// qwen2a projector, F32 attention, flash attention off), the file's chat
// template applied by llama_chat_apply_template() to mtmd's media marker
// then the prompt, the text either side of the marker tokenised as
// mtmd_tokenize() does, with mtmd's "<|audio_bos|>" and "<|audio_eos|>"
// around the sound for qwen2a (--bare leaves them out, as npullm does),
// then the most likely token until an end-of-generation token.  The
// answer goes to stdout.  The set-up of the text model and mtmd, the chat
// template and the greedy answer are mtmd-caption.c's (mtmd-common.c).
//
// clip.h, clip-impl.h and mtmd-audio.h are llama.cpp's internal headers;
// built against a llama.cpp build by build-llamacpp.sh, not part of the
// meson build.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "clip.h"
#include "clip-impl.h"
#include "llama.h"
#include "mtmd.h"
#include "mtmd-audio.h"
#include "mtmd-common.h"
#include "mtmd-helper.h"

static int
usage (const char *argv0)
{
  fprintf (stderr, "usage: %s -m TEXT.gguf --mmproj MMPROJ.gguf --audio "
      "FILE.wav -p PROMPT [-n MAX_TOKENS] [--frames N] [--bare]\n", argv0);
  return 2;
}

// text -> tokens, as mtmd_tokenize() cuts its text parts
static std::vector<llama_token>
tokenize (const llama_vocab *vocab, const std::string &text, bool add_special)
{
  std::vector<llama_token> t (text.size () + 8);
  int n = llama_tokenize (vocab, text.c_str (), (int32_t) text.size (),
      t.data (), (int32_t) t.size (), add_special, true);
  t.resize (n < 0 ? 0 : n);
  return t;
}

static bool
decode_tokens (llama_context *lctx, std::vector<llama_token> &t,
    llama_pos *n_past, bool last_logits)
{
  if (t.empty ())
    return true;
  llama_batch b = llama_batch_init ((int32_t) t.size (), 0, 1);
  for (size_t i = 0; i < t.size (); i++) {
    b.token[i] = t[i];
    b.pos[i] = *n_past + (llama_pos) i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = last_logits && i + 1 == t.size ();
  }
  b.n_tokens = (int32_t) t.size ();
  bool ok = llama_decode (lctx, b) == 0;
  llama_batch_free (b);
  *n_past += (llama_pos) t.size ();
  return ok;
}

static bool
decode_embd (llama_context *lctx, const std::vector<float> &embd,
    int n_tokens, int n_embd, llama_pos *n_past)
{
  llama_batch b = llama_batch_init (n_tokens, n_embd, 1);
  memcpy (b.embd, embd.data (), sizeof (float) * n_tokens * n_embd);
  for (int i = 0; i < n_tokens; i++) {
    b.pos[i] = *n_past + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = false;
  }
  b.n_tokens = n_tokens;
  bool ok = llama_decode (lctx, b) == 0;
  llama_batch_free (b);
  *n_past += n_tokens;
  return ok;
}

int
main (int argc, char **argv)
{
  const char *model_path = NULL, *mmproj_path = NULL, *audio_path = NULL;
  const char *prompt = NULL;
  int max_tokens = 32, frames = 100, i, ret = 1;
  bool bare = false;

  for (i = 1; i < argc; i++) {
    if (!strcmp (argv[i], "--bare")) {
      bare = true;
      continue;
    }
    if (i + 1 >= argc)
      return usage (argv[0]);
    if (!strcmp (argv[i], "-m"))
      model_path = argv[i + 1];
    else if (!strcmp (argv[i], "--mmproj"))
      mmproj_path = argv[i + 1];
    else if (!strcmp (argv[i], "--audio"))
      audio_path = argv[i + 1];
    else if (!strcmp (argv[i], "-p"))
      prompt = argv[i + 1];
    else if (!strcmp (argv[i], "-n"))
      max_tokens = atoi (argv[i + 1]);
    else if (!strcmp (argv[i], "--frames"))
      frames = atoi (argv[i + 1]);
    else
      return usage (argv[0]);
    i++;
  }
  if (!model_path || !mmproj_path || !audio_path || !prompt
      || max_tokens <= 0 || frames <= 0 || frames % 4)
    return usage (argv[0]);

  // the text model, and mtmd only for its WAV decoding (to its audio
  // sample rate)
  MtmdCheck c;
  clip_ctx *actx = NULL;
  mtmd_helper_bitmap_wrapper bw = { NULL, NULL };
  if (mtmd_check_open (&c, "mtmd-audio-caption", model_path,
          mmproj_path) != 0)
    goto out;

  clip_context_params ccp;
  memset (&ccp, 0, sizeof (ccp));
  ccp.use_gpu = false;
  ccp.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
  ccp.image_min_tokens = -1;
  ccp.image_max_tokens = -1;
  ccp.warmup = false;
  actx = clip_init (mmproj_path, ccp).ctx_a;
  if (!actx) {
    fprintf (stderr, "mtmd-audio-caption: no audio encoder in %s\n",
        mmproj_path);
    goto out;
  }
  bw = mtmd_helper_bitmap_init_from_file (c.mctx, audio_path, false,
      mtmd_helper_init_opt_default ());
  if (!bw.bitmap || !mtmd_bitmap_is_audio (bw.bitmap)) {
    fprintf (stderr, "mtmd-audio-caption: cannot read %s as audio\n",
        audio_path);
    goto out;
  }

  {
    // llama.cpp's log-mel of the clip (its first 30 s window), cut to the
    // encoder's window
    const float *samples = (const float *) mtmd_bitmap_get_data (bw.bitmap);
    size_t n_samples = mtmd_bitmap_get_n_bytes (bw.bitmap) / sizeof (float);
    mtmd_audio_preprocessor_whisper pre (actx);
    std::vector<mtmd_audio_mel> mels;
    pre.initialize ();
    if (!pre.preprocess (samples, n_samples, mels) || mels.empty ()
        || mels[0].n_len < frames) {
      fprintf (stderr, "mtmd-audio-caption: no log-mel of %s\n", audio_path);
      goto out;
    }
    const mtmd_audio_mel &m = mels[0];
    std::vector<float> window ((size_t) m.n_mel * frames);
    for (int b = 0; b < m.n_mel; b++)
      memcpy (&window[(size_t) b * frames], &m.data[(size_t) b * m.n_len],
          sizeof (float) * frames);

    clip_image_f32 mel;
    mel.set_size ({frames, (int) m.n_mel}, false, true);
    mel.cpy_buf (window);
    int n_tokens = clip_n_output_tokens (actx, &mel);
    int n_embd = clip_n_mmproj_embd (actx);
    clip_image_f32_batch batch;
    batch.is_audio = true;
    batch.entries.push_back (std::move (mel));
    // sized by the caller: clip.cpp copies into it
    std::vector<float> embd ((size_t) n_tokens * n_embd);
    if (!clip_image_batch_encode (actx, 1, &batch, embd)
        || embd.size () != (size_t) n_tokens * n_embd
        || n_embd != llama_model_n_embd (c.model)) {
      fprintf (stderr, "mtmd-audio-caption: encoding failed (%zu values "
          "for %d tokens of %d, the text model's width %d)\n", embd.size (),
          n_tokens, n_embd, llama_model_n_embd (c.model));
      goto out;
    }

    // the prompt around mtmd's media marker
    char formatted[4096];
    int n = mtmd_check_format (&c, prompt, formatted, sizeof (formatted));
    if (n < 0)
      goto out;
    std::string text (formatted, n);
    size_t at = text.find (mtmd_default_marker ());
    if (at == std::string::npos) {
      fprintf (stderr, "mtmd-audio-caption: the template lost the marker\n");
      goto out;
    }
    std::string before = text.substr (0, at);
    std::string after = text.substr (at + strlen (mtmd_default_marker ()));
    std::vector<llama_token> t_before = tokenize (c.vocab, before, true);
    if (!bare) {
      std::vector<llama_token> beg = tokenize (c.vocab, "<|audio_bos|>",
          false);
      t_before.insert (t_before.end (), beg.begin (), beg.end ());
    }
    std::vector<llama_token> t_after;
    if (!bare)
      t_after = tokenize (c.vocab, "<|audio_eos|>", false);
    std::vector<llama_token> rest = tokenize (c.vocab, after, false);
    t_after.insert (t_after.end (), rest.begin (), rest.end ());

    llama_pos n_past = 0;
    if (!decode_tokens (c.lctx, t_before, &n_past, false)
        || !decode_embd (c.lctx, embd, n_tokens, n_embd, &n_past)
        || !decode_tokens (c.lctx, t_after, &n_past, true)) {
      fprintf (stderr, "mtmd-audio-caption: the prompt failed\n");
      goto out;
    }
    if (mtmd_check_greedy (&c, max_tokens) == 0)
      ret = 0;
  }

out:
  if (bw.bitmap)
    mtmd_bitmap_free (bw.bitmap);
  if (actx)
    clip_free (actx);
  mtmd_check_close (&c);
  return ret;
}
