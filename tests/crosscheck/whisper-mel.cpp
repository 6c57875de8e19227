// SPDX-License-Identifier: LGPL-2.1-or-later
// gst-npu cross-check: llama.cpp's Whisper log-mel, for logmel.sh
//
// whisper-mel IN.f32 OUT.f32 N_MELS: reads 16 kHz mono float samples and
// writes what llama.cpp's mtmd_audio_preprocessor_whisper (tools/mtmd/
// mtmd-audio.cpp, compiled in as it is) makes of them: every 3000-frame
// window, n_mels rows of 3000 floats each.  The hyper-parameters are those
// clip.cpp sets for Whisper-style projectors (qwen2a, ultravox); the clip
// context is only asked for them, so a stand-in answers.
#include "mtmd-audio.h"
#include "clip.h"
#include "clip-impl.h"
#include <cstdlib>
static void quiet(enum ggml_log_level, const char * t, void *) { fputs(t, stderr); }
struct clip_logger_state g_logger_state = {quiet, NULL};
#include <cstdio>
#include <vector>
static clip_hparams hp;
const clip_hparams * clip_get_hparams(const struct clip_ctx *) { return &hp; }
int main(int argc, char ** argv) {
    hp.n_mel_bins = atoi(argv[3]); hp.audio_n_fft = 400; hp.audio_window_len = 400;
    hp.audio_hop_len = 160; hp.audio_sample_rate = 16000;
    FILE * f = fopen(argv[1], "rb"); std::vector<float> s; float v;
    while (fread(&v, 4, 1, f) == 1) s.push_back(v); fclose(f);
    mtmd_audio_preprocessor_whisper p(nullptr); p.initialize();
    std::vector<mtmd_audio_mel> out;
    if (!p.preprocess(s.data(), s.size(), out)) return 1;
    FILE * o = fopen(argv[2], "wb");
    for (auto & m : out) fwrite(m.data.data(), 4, m.data.size(), o);
    fclose(o); fprintf(stderr, "%zu chunks of %lld x %lld\n", out.size(), (long long) out[0].n_mel, (long long) out[0].n_len);
    return 0;
}
