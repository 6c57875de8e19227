/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: everything an application embedding the elements needs */
#ifndef __GST_NPU_H__
#define __GST_NPU_H__

#include <npu/gstnpucpuaccess.h>
#include <npu/gstnpuallocator.h>
#include <npu/gstnpubufferpool.h>
#include <npu/gstnpufencemeta.h>
#include <npu/gstnpuimport.h>
#include <npu/gstnpuinputwatch.h>
#include <npu/gstnpuallocation.h>
#include <npu/gstnpuaudiofrontend.h>
#include <npu/gstnpulogmel.h>
#include <npu/gstnputensormeta.h>
#include <npu/gstnputokensmeta.h>
#include <npu/gstnpuvideoinfo.h>
#include <npu/gstnpuweights.h>
#include <npu/gstnpuelementutils.h>
#include <npu/gstnpuencoderelement.h>

#endif /* __GST_NPU_H__ */
