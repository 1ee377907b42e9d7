/* cushim run's options (tools/run_options.c): one flag per row of the configuration table
 * (common/options.h; CUSHIM_OFFLOAD_MIN is --offload-min), set as the variable in cushim's own
 * environment for the program to inherit. Which flags were given is kept for the one run of the
 * process; nothing here is thread-safe (the CLI is single-threaded). */
#ifndef CUSHIM_TOOLS_RUN_OPTIONS_H
#define CUSHIM_TOOLS_RUN_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "common/config.h"

/* "--offload-min" for "CUSHIM_OFFLOAD_MIN", into buf (cut to fit len, NUL included). */
void run_flag_name(const char *variable, char *buf, size_t len);

/* Whether option `id` was given as a flag (run_config_flag), and whether a flag's value was bad
 * (run_print_config_error said so: the run stops with exit 2). */
int run_flag_given(enum cushim_option id);
int run_flag_bad(void);

/* Says, one line each on stderr, the flags given an empty value ("--device-limit ''"): they take
 * the default, as an empty variable does, but a typed value is never dropped silently (a
 * fresh-user trial: a script's unset $LIMIT ran with no budget, without a word). */
void run_say_empty_flags(void);

/* Applies argv[i] (and argv[i + 1] for "--flag VALUE") if it is a configuration flag: setenv of
 * its variable, a boolean one alone being on; a flag given again says which value replaces which.
 * Returns the arguments consumed (1 or 2), 0 if argv[i] is no configuration flag, -1 after saying
 * why (a missing value, a value that looks like an option). */
int run_config_flag(int argc, char **argv, int i);

/* The run option nearest to the mistyped `word` (its name before any '='; the table's flags,
 * --json, --quiet, --help; cushim_text_nearest's rule) into buf, its edit distance into
 * *distance (0: the option itself, given a value it does not take). 0 if none is near. */
int run_nearest_flag(const char *word, char *buf, size_t len, size_t *distance);

/* Whether the program word argv[i] was meant as part of an option's value: 1 when argv[i - 1] is
 * a switch (--spill) and argv[i] a boolean ("--spill on"); 2 when argv[i - 2] is an option that
 * took argv[i - 1] as its value and the two words make one ("--device-limit 1 MiB"); else 0. */
int run_split_value(char **argv, int i);

/* cushim run --help, to f. */
void run_usage(FILE *f);

/* cushim_config_load's report callback for a run: a bad value of a given flag is named by the
 * flag and marks the run bad (run_flag_bad); the environment's problems are its own lines,
 * unless run_env_said(1) was called. */
void run_print_config_error(const struct cushim_config_error *e);

/* 1: the environment's problems were said already by an enclosing run that saw these same values
 * (its CUSHIM_RUN_CHECKED fingerprint is ours): run_print_config_error leaves them out; a flag's
 * are still said. */
void run_env_said(int said);

#endif
