/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Built by test-install.sh against the installed gst-npu-1.0.pc only: a few
 * calls of the core and of libgstnpu-1.0, checked against constants. */
#include <npu/npu.h>
#include <core/formats/npumxfp4.h>
#include <core/device/npufence.h>

int
main (int argc, char **argv)
{
  float in[32], out[32];
  NpuBlockMxfp4 block;
  GstAllocator *allocator;
  GstMemory *mem;
  NpuFence *fence;
  int i;

  gst_init (&argc, &argv);
  for (i = 0; i < 32; i++)
    in[i] = (i % 4) * 0.5f;     /* 0, 0.5, 1, 1.5: exact in E2M1 */
  npu_mxfp4_quantize_f32 (in, &block, 32);
  npu_mxfp4_dequantize (&block, out, 32);
  for (i = 0; i < 32; i++)
    if (out[i] != in[i])
      return 1;

  fence = npu_fence_new_signalled ();
  if (!npu_fence_is_signalled (fence))
    return 2;
  npu_fence_unref (fence);

  allocator = gst_npu_allocator_get_default ();
  mem = gst_allocator_alloc (allocator, 4096, NULL);
  if (!mem || !gst_is_npu_memory (mem))
    return 3;
  gst_memory_unref (mem);
  gst_object_unref (allocator);

  /* the encoders' base class, for elements built outside the tree */
  if (!G_TYPE_IS_ABSTRACT (GST_TYPE_NPU_ENCODER_ELEMENT) ||
      !g_type_is_a (GST_TYPE_NPU_ENCODER_ELEMENT, GST_TYPE_ELEMENT))
    return 4;
  g_print ("install-check: ok\n");
  return 0;
}
