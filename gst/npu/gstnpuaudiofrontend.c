/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: whatever PCM comes in to the 16 kHz mono float an audio
 * encoder reads
 *
 * One GstAudioConverter (gstreamer-audio) does it in one call per buffer,
 * reading the buffer's interleaved S16LE, S32LE or F32LE samples where
 * they are: unpack, down-mix to mono (the mean of the channels, whatever
 * their positions), and resample with GstAudioResampler's Kaiser-windowed
 * sinc at its highest quality (#GST_NPU_AUDIO_FRONTEND_QUALITY).  When the
 * input already is 16 kHz mono the resampler is not used at all.
 *
 * The resampler's output is aligned with its input (its history starts
 * half a filter of zeros deep), so output sample k is at time k / 16000
 * from the first input sample; the last get_latency() input frames' worth
 * of output comes out only when that much silence is pushed after them
 * (convert() with @in %NULL).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuaudiofrontend.h"

struct _GstNpuAudioFrontend
{
  GstAudioConverter *convert;
  GstAudioInfo in, out;
};

/**
 * gst_npu_audio_frontend_parse_caps:
 * @caps: fixed audio/x-raw caps
 * @info: (out): what they say
 * @error: why not
 *
 * Like gst_audio_info_from_caps(), but takes 3 to 8 channels without a
 * channel-mask (the front end mixes by mean, so positions do not matter).
 * Only interleaved S16LE, S32LE and F32LE, 1 to 8 channels, 8 to 48 kHz.
 */
gboolean
gst_npu_audio_frontend_parse_caps (const GstCaps * caps, GstAudioInfo * info,
    GError ** error)
{
  GstStructure *s;
  const gchar *format, *layout;
  GstAudioFormat fmt;
  gint rate = 0, channels = 0;

  if (!gst_caps_is_fixed (caps) || gst_caps_get_size (caps) != 1)
    goto bad;
  s = gst_caps_get_structure (caps, 0);
  if (!gst_structure_has_name (s, "audio/x-raw"))
    goto bad;
  format = gst_structure_get_string (s, "format");
  layout = gst_structure_get_string (s, "layout");
  fmt = format ? gst_audio_format_from_string (format) :
      GST_AUDIO_FORMAT_UNKNOWN;
  if (fmt != GST_AUDIO_FORMAT_S16LE && fmt != GST_AUDIO_FORMAT_S32LE &&
      fmt != GST_AUDIO_FORMAT_F32LE)
    goto bad;
  if (g_strcmp0 (layout, "interleaved") != 0)
    goto bad;
  if (!gst_structure_get_int (s, "rate", &rate) || rate < 8000 || rate > 48000)
    goto bad;
  if (!gst_structure_get_int (s, "channels", &channels) || channels < 1 ||
      channels > 8)
    goto bad;

  gst_audio_info_init (info);
  gst_audio_info_set_format (info, fmt, rate, channels, NULL);
  return TRUE;

bad:
  {
    gchar *str = gst_caps_to_string (caps);

    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION,
        "Cannot take %s: npuaudiotok takes interleaved S16LE, S32LE or "
        "F32LE audio, 1 to 8 channels, 8000 to 48000 Hz", str);
    g_free (str);
    return FALSE;
  }
}

/* A 1 x channels matrix of 1/channels: mono is the mean of the inputs. */
static void
set_mean_mix (GstStructure * config, gint channels)
{
  GValue matrix = G_VALUE_INIT, row = G_VALUE_INIT, v = G_VALUE_INIT;
  gint c;

  g_value_init (&matrix, GST_TYPE_ARRAY);
  g_value_init (&row, GST_TYPE_ARRAY);
  g_value_init (&v, G_TYPE_FLOAT);
  for (c = 0; c < channels; c++) {
    g_value_set_float (&v, 1.0f / channels);
    gst_value_array_append_value (&row, &v);
  }
  gst_value_array_append_and_take_value (&matrix, &row);
  gst_structure_take_value (config, GST_AUDIO_CONVERTER_OPT_MIX_MATRIX,
      &matrix);
  g_value_unset (&v);
}

/**
 * gst_npu_audio_frontend_new:
 * @in: the input (see gst_npu_audio_frontend_parse_caps())
 * @out_rate: the encoder's rate (16000 for Whisper-style encoders)
 * @error: why not
 *
 * Returns: (transfer full): a converter to mono F32 at @out_rate.
 */
GstNpuAudioFrontend *
gst_npu_audio_frontend_new (const GstAudioInfo * in, gint out_rate,
    GError ** error)
{
  GstNpuAudioFrontend *fe = g_new0 (GstNpuAudioFrontend, 1);
  GstStructure *config;

  fe->in = *in;
  gst_audio_info_init (&fe->out);
  gst_audio_info_set_format (&fe->out, GST_AUDIO_FORMAT_F32, out_rate, 1, NULL);

  config = gst_structure_new_empty ("npu-audio-frontend");
  gst_structure_set (config, GST_AUDIO_CONVERTER_OPT_RESAMPLER_METHOD,
      GST_TYPE_AUDIO_RESAMPLER_METHOD, GST_AUDIO_RESAMPLER_METHOD_KAISER, NULL);
  gst_audio_resampler_options_set_quality (GST_AUDIO_RESAMPLER_METHOD_KAISER,
      GST_NPU_AUDIO_FRONTEND_QUALITY, GST_AUDIO_INFO_RATE (in), out_rate,
      config);
  if (GST_AUDIO_INFO_CHANNELS (in) > 1)
    set_mean_mix (config, GST_AUDIO_INFO_CHANNELS (in));

  fe->convert = gst_audio_converter_new (GST_AUDIO_CONVERTER_FLAG_NONE,
      &fe->in, &fe->out, config);
  if (!fe->convert) {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION,
        "Cannot convert %s, %d channels, %d Hz to mono F32 at %d Hz",
        GST_AUDIO_INFO_NAME (in), GST_AUDIO_INFO_CHANNELS (in),
        GST_AUDIO_INFO_RATE (in), out_rate);
    g_free (fe);
    return NULL;
  }
  return fe;
}

void
gst_npu_audio_frontend_free (GstNpuAudioFrontend * fe)
{
  if (!fe)
    return;
  gst_audio_converter_free (fe->convert);
  g_free (fe);
}

/* Forgets the history (after a flush or a discontinuity). */
void
gst_npu_audio_frontend_reset (GstNpuAudioFrontend * fe)
{
  gst_audio_converter_reset (fe->convert);
}

/* Output frames the next convert() of @in_frames produces. */
gsize
gst_npu_audio_frontend_get_out_frames (GstNpuAudioFrontend * fe,
    gsize in_frames)
{
  return gst_audio_converter_get_out_frames (fe->convert, in_frames);
}

/* Input frames of silence that push the last real output out. */
gsize
gst_npu_audio_frontend_get_latency (GstNpuAudioFrontend * fe)
{
  return gst_audio_converter_get_max_latency (fe->convert);
}

/**
 * gst_npu_audio_frontend_convert:
 * @fe: the front end
 * @in: (nullable): @in_frames interleaved frames, read in place; %NULL
 *   for silence
 * @in_frames: how many
 * @out: room for gst_npu_audio_frontend_get_out_frames() samples
 *
 * Returns: the samples written to @out.
 */
gsize
gst_npu_audio_frontend_convert (GstNpuAudioFrontend * fe, gconstpointer in,
    gsize in_frames, gfloat * out)
{
  gsize n_out = gst_audio_converter_get_out_frames (fe->convert, in_frames);
  gpointer zeros = NULL, inp[1], outp[1] = { out };
  gboolean ok;

  /* Silence as real zeros: GstAudioConverter's own (in = NULL) leaves a
   * tail that depends on the sizes of the blocks before it (measured up
   * to 2.6e-4 on 1.22), so the same audio in 10 ms or 1 s buffers would
   * not end the same. */
  if (!in)
    in = zeros = g_malloc0 (in_frames * GST_AUDIO_INFO_BPF (&fe->in));
  inp[0] = (gpointer) in;
  ok = gst_audio_converter_samples (fe->convert, 0, inp, in_frames, outp,
      n_out);
  g_free (zeros);
  return ok ? n_out : 0;
}
