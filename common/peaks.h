/* Peak reset on a live segment, shared by the shim (cushim_reset_peak in cushim.h) and the CLI
 * (`cushim reset-peak`), which maps the owner's segment read-write.
 *
 * Each peak becomes its current value by compare-and-swap, then is raised again to the current
 * value read after the swap, so a concurrent allocation can never leave peak < current
 * (DESIGN.md: "reset a peak (compare-and-swap peak := current) without the program's help").
 * The peaks of the phase the process is in (`phase`, enum cushim_phase) are reset too; those of
 * the other phase keep their record. The update is bracketed by the record's seqlock. Thread- and
 * process-safe; no system calls.
 */
#ifndef CUSHIM_PEAKS_H
#define CUSHIM_PEAKS_H

#include "common/segment.h"

void cushim_reset_record_peaks(struct cushim_device_record *r, uint32_t phase);

#endif
