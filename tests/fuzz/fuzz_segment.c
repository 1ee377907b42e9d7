/* libFuzzer target: the segment reader on arbitrary bytes (issue 3: "never crash the reader"),
 * and the text and JSON summaries of what it accepts (they index names by a record's kind and
 * sum its sizes). Built with clang -fsanitize=fuzzer,address,undefined by tests/meson.build and
 * run for a bounded time in CI. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct cushim_snapshot snap;
    char err[256];
    /* The reader needs 8-byte alignment for its atomic loads, as a mapping has. */
    void *copy = NULL;
    if (posix_memalign(&copy, 64, size ? size : 1) != 0)
        return 0;
    memcpy(copy, data, size);
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w")))
        abort();
    if (cushim_snapshot_read(copy, size, &snap, 2, 0, err, sizeof err) != 0) {
        if (memchr(err, '\0', sizeof err) == NULL)
            abort();
    } else {
        struct jsonw w;
        cushim_text_process(sink, &snap, NULL);
        jsonw_init(&w, sink);
        cushim_json_process(&w, NULL, &snap, 1);
    }
    free(copy);
    return 0;
}
