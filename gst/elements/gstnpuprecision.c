/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the `precision` property's type (gstnpuprecision.h) */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuprecision.h"

#include <core/cpu/npumatmul.h>

G_STATIC_ASSERT ((int) GST_NPU_PRECISION_FAST ==
    (int) NPU_MATMUL_PRECISION_FAST);
G_STATIC_ASSERT ((int) GST_NPU_PRECISION_ACCURATE ==
    (int) NPU_MATMUL_PRECISION_ACCURATE);

GType
gst_npu_precision_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    {GST_NPU_PRECISION_FAST, "int8 activations, as llama.cpp", "fast"},
    {GST_NPU_PRECISION_ACCURATE, "about 16-bit activations or more (int16 "
          "in AVX-512 GEMMs, F32 in AVX2 GEMMs, else int8 and their int8 "
          "residual)", "accurate"},
    {0, NULL, NULL}
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstNpuPrecision", values);
    g_once_init_leave (&type, t);
  }
  return type;
}
