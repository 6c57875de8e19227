/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu real-kernel tests: shared helpers
 *
 * These programs run inside the QEMU guest started by qemu-run.sh, against a
 * real kernel's dma-buf heap, udmabuf and vgem.  They print TAP-like lines:
 * "ok - what" / "not ok - what" for assertions and "# ..." for what they saw
 * (fdinfo lines, fence states), and exit non-zero if any assertion failed.
 */
#ifndef __RK_COMMON_H__
#define __RK_COMMON_H__

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/dma-buf.h>
#include <linux/sync_file.h>
#include <glib.h>

static int rk_failures;
static int rk_checks;

#define RK_CHECK(cond, ...) G_STMT_START { \
    gboolean _rk_ok = !!(cond); \
    int _rk_errno = errno; \
    rk_checks++; \
    printf ("%s - ", _rk_ok ? "ok" : "not ok"); \
    printf (__VA_ARGS__); \
    if (!_rk_ok) { \
      printf ("  [%s:%d: %s; errno %s]", __FILE__, __LINE__, #cond, \
          g_strerror (_rk_errno)); \
      rk_failures++; \
    } \
    printf ("\n"); \
    fflush (stdout); \
  } G_STMT_END

#define RK_INFO(...) G_STMT_START { \
    printf ("# "); printf (__VA_ARGS__); printf ("\n"); fflush (stdout); \
  } G_STMT_END

/* A GError check: prints the message when it fails. */
#define RK_CHECK_NO_ERROR(ok, err, ...) G_STMT_START { \
    RK_CHECK ((ok) && (err) == NULL, __VA_ARGS__); \
    if ((err) != NULL) { RK_INFO ("  error: %s", (err)->message); \
      g_clear_error (&(err)); } \
  } G_STMT_END

static inline int
rk_finish (const char *name)
{
  printf ("# %s: %d checks, %d failed\n", name, rk_checks, rk_failures);
  return rk_failures ? 1 : 0;
}

/* The value of "key:" in /proc/self/fdinfo/FD, without the tab; NULL if
 * there is no such line.  The kernel writes dma-buf fdinfo as
 * "size:\t%zu\ncount:\t%ld\nexp_name:\t%s\n" (drivers/dma-buf/dma-buf.c). */
static inline gchar *
rk_fdinfo_get (int fd, const char *key)
{
  gchar *path = g_strdup_printf ("/proc/self/fdinfo/%d", fd);
  gchar *contents = NULL, *ret = NULL;
  gchar **lines, **l;
  gsize klen = strlen (key);

  if (!g_file_get_contents (path, &contents, NULL, NULL)) {
    g_free (path);
    return NULL;
  }
  lines = g_strsplit (contents, "\n", -1);
  for (l = lines; *l; l++) {
    if (strncmp (*l, key, klen) == 0 && (*l)[klen] == ':') {
      const char *v = *l + klen + 1;
      ret = g_strdup (v[0] == '\t' ? v + 1 : v);
      break;
    }
  }
  g_strfreev (lines);
  g_free (contents);
  g_free (path);
  return ret;
}

/* TRUE if /proc/self/fdinfo/FD has exactly the line "exp_name:\tNAME". */
static inline gboolean
rk_fdinfo_has_line (int fd, const char *line)
{
  gchar *path = g_strdup_printf ("/proc/self/fdinfo/%d", fd);
  gchar *contents = NULL;
  gboolean found = FALSE;

  if (g_file_get_contents (path, &contents, NULL, NULL)) {
    gchar **lines = g_strsplit (contents, "\n", -1), **l;
    for (l = lines; *l; l++)
      if (strcmp (*l, line) == 0)
        found = TRUE;
    g_strfreev (lines);
  }
  g_free (contents);
  g_free (path);
  return found;
}

/* Print the dma-buf lines of fdinfo (size, count, exp_name, name). */
static inline void
rk_fdinfo_print (int fd, const char *what)
{
  static const char *keys[] = { "size", "count", "exp_name", "name" };
  gchar *target, *link = g_strdup_printf ("/proc/self/fd/%d", fd);
  guint i;

  target = g_file_read_link (link, NULL);
  RK_INFO ("%s: fd %d -> %s", what, fd, target ? target : "?");
  for (i = 0; i < G_N_ELEMENTS (keys); i++) {
    gchar *v = rk_fdinfo_get (fd, keys[i]);
    if (v)
      RK_INFO ("%s: fdinfo %s:\\t%s", what, keys[i], v);
    g_free (v);
  }
  g_free (target);
  g_free (link);
}

static inline gboolean
rk_fd_readable (int fd)
{
  struct pollfd p = { .fd = fd, .events = POLLIN };
  return poll (&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* sync_file state as the kernel reports it: 1 signalled, 0 active, <0 error */
static inline int
rk_sync_file_status (int fd, gboolean print, const char *what)
{
  struct sync_file_info info;
  struct sync_fence_info fi;

  memset (&info, 0, sizeof info);
  memset (&fi, 0, sizeof fi);
  info.num_fences = 1;
  info.sync_fence_info = (uintptr_t) & fi;
  if (ioctl (fd, SYNC_IOC_FILE_INFO, &info) != 0)
    return -1000 - errno;
  if (print)
    RK_INFO ("%s: sync_file fd %d name=\"%s\" status=%d (%s) fences=%u "
        "driver=%s timeline=%s", what, fd, info.name, info.status,
        info.status == 1 ? "signalled" : info.status == 0 ? "active" :
        "error", info.num_fences, fi.driver_name, fi.obj_name);
  return info.status;
}

#endif /* __RK_COMMON_H__ */
