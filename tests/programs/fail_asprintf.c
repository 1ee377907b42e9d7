/* libfailasprintf.so: preloaded into `cushim` to test what it does when asprintf(3) and
 * vasprintf(3) fail for lack of memory: both return -1 (errno ENOMEM) every time. */
#ifndef _GNU_SOURCE /* meson.build passes -D_GNU_SOURCE to the whole project */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int vasprintf(char **strp, const char *fmt, va_list ap)
{
    (void)strp;
    (void)fmt;
    (void)ap;
    errno = ENOMEM;
    return -1;
}

int asprintf(char **strp, const char *fmt, ...)
{
    (void)strp;
    (void)fmt;
    errno = ENOMEM;
    return -1;
}
