/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the "npu" plugin */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <gst/gst.h>

#include "gstnpudeviceprovider.h"
#include "gstmxfp4weights.h"
#include "gstnpullm.h"
#include "gstnpuvisiontok.h"
#include "gstnpuaudiotok.h"
#include "gstnputokenpay.h"
#include "gstnputokendepay.h"
#include "gstnputimeline.h"

static gboolean
plugin_init (GstPlugin * plugin)
{
  gboolean ret = FALSE;

  ret |= GST_DEVICE_PROVIDER_REGISTER (npudeviceprovider, plugin);
  ret |= GST_ELEMENT_REGISTER (mxfp4weights, plugin);
  ret |= GST_ELEMENT_REGISTER (npullm, plugin);
  ret |= GST_ELEMENT_REGISTER (npuvisiontok, plugin);
  ret |= GST_ELEMENT_REGISTER (npuaudiotok, plugin);
  ret |= GST_ELEMENT_REGISTER (nputokenpay, plugin);
  ret |= GST_ELEMENT_REGISTER (nputokendepay, plugin);
  /* GST_TRACERS="npu-timeline(file=trace.json)" (docs/cost.md) */
  ret |= gst_tracer_register (plugin, "npu-timeline", GST_TYPE_NPU_TIMELINE);
  return ret;
}

GST_PLUGIN_DEFINE (GST_VERSION_MAJOR, GST_VERSION_MINOR, npu,
    "On-device multimodal inference: MXFP4 weights, vision and audio "
    "tokenizers and a language model over zero-copy NPU memory",
    plugin_init, VERSION, GST_LICENSE, GST_PACKAGE_NAME, GST_PACKAGE_ORIGIN)
