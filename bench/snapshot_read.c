/* snapshot_read SEGMENT_FILE [N]: cost of one consistent snapshot of a segment (the CLI's read
 * path): maps the file and takes N snapshots, printing ns per snapshot (wall clock, noisy) -
 * the callgrind instruction count of the same run is the stable figure (scripts/bench). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/snapshot.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    long n = argc > 2 ? atol(argv[2]) : 100000;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 1;
    size_t len = sizeof(struct cushim_segment);
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return 1;
    static struct cushim_snapshot s;
    char err[200];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        if (cushim_snapshot_read(m, len, &s, 1000, CUSHIM_COPY_PATIENCE_NS, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    printf("snapshot_ns=%.0f devices=%u\n", ns, s.device_count);
    return 0;
}
