/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: npuaudiotok's log-mel of a clip, for logmel.sh
 *
 * npu-log-mel IN.f32 OUT.f32 N_MELS: reads 16 kHz mono float samples (a
 * clip of up to 30 s) and writes the normalised log-mel of its 3000-frame
 * window, n_mels rows of 3000 floats, as gst_npu_log_mel_compute() gives
 * it to the encoder.
 */
#include <npu/npu.h>

#include <stdio.h>
#include <stdlib.h>

int
main (int argc, char **argv)
{
  gchar *data;
  gsize len;
  guint n_mels;
  GstNpuLogMel *lm;
  gfloat *mel;
  GError *error = NULL;

  if (argc != 4) {
    fprintf (stderr, "usage: %s IN.f32 OUT.f32 N_MELS\n", argv[0]);
    return 2;
  }
  if (!g_file_get_contents (argv[1], &data, &len, &error)) {
    fprintf (stderr, "%s\n", error->message);
    return 1;
  }
  n_mels = atoi (argv[3]);
  if (len / 4 > 480000 || (n_mels != 80 && n_mels != 128)) {
    fprintf (stderr, "a clip of up to 30 s, 80 or 128 mels\n");
    return 2;
  }
  lm = gst_npu_log_mel_new (n_mels);
  mel = g_new (gfloat, (gsize) n_mels * 3000);
  gst_npu_log_mel_compute (lm, (const gfloat *) data, len / 4, 3000, mel);
  if (!g_file_set_contents (argv[2], (const gchar *) mel,
          (gssize) n_mels * 3000 * 4, &error)) {
    fprintf (stderr, "%s\n", error->message);
    return 1;
  }
  g_free (mel);
  gst_npu_log_mel_free (lm);
  g_free (data);
  return 0;
}
