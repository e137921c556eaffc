/* flags.h - the options of a subcommand, described once in a table.
 *
 * From a command's table come getopt_long's struct option array, the
 * command's --help text, its part of the configuration reference (docs/cli.md)
 * (dstrain help --markdown, scripts/update-readme-reference.sh), and the
 * errors for a wrong command line (an unknown option with the nearest flag
 * suggested, a missing argument naming the flag). Adding a flag is one table
 * entry and one case in the command's switch.
 *
 * A command "frob" (see cli_eval.c for a small real one):
 *
 *   enum { O_OUT = 256, O_STEPS, O_FAST };      // ids: any int > 0 but '?' and ':'
 *   static const ds_flag frob_flags[] = {
 *       DS_FLAG_SECTION("input"),               // a heading in --help and the table
 *       DS_FLAG_OPERAND("FILE...", "the files to frob"),   // shown, not parsed
 *       DS_FLAG_ARG(O_OUT, "out", "FILE", NULL, "where the result goes"),
 *       DS_FLAG_ARG(O_STEPS, "steps", "N", "8", "how many steps"),   // "8": the default
 *       DS_FLAG_SWITCH(O_FAST, "fast", "skip the checks"),
 *       DS_FLAG_END};
 *   const ds_flag_cmd ds_cli_frob_cmd = {
 *       .name = "frob", .run = ds_cli_frob, .summary = "one line for dstrain --help",
 *       .usage = "dstrain frob --out FILE [options] FILE...", .flags = frob_flags};
 *
 *   int ds_cli_frob(int argc, char **argv)    // argv[0] is "frob"
 *   {
 *       ds_flags fl;
 *       int c, rc = ds_flags_begin(&fl, &ds_cli_frob_cmd, argc, argv);
 *       if (rc != DS_FLAGS_GO)
 *           return rc;                // 0 after --help, 2 after a usage error (printed)
 *       while ((c = ds_flags_next(&fl)) != -1)
 *           switch (c) {
 *           case O_OUT: out = optarg; break;
 *           ...
 *           default: return ds_flags_unhandled(&fl, c);
 *           }
 *       // operands: argv[optind] .. argv[argc - 1]
 *   }
 *
 * and &ds_cli_frob_cmd listed in ds_cli_commands (cli_common.c), so that
 * dstrain frob runs it and dstrain --help, dstrain help frob, dstrain help
 * --markdown and the tests (tests/cli/cli_reference.cmake) see it; then run
 * scripts/update-readme-reference.sh.
 *
 * Every table gets --help (and -h) without an entry. Options are matched
 * whole: --batch 8 or --batch=8; getopt_long's abbreviations (--bat) are
 * refused by ds_flags_begin, which names the flags they could mean, so that
 * a flag added later never changes what an existing command line means.
 * The help text is prose: the --help printer wraps it at 80 columns, the
 * Markdown printer escapes it and puts --flags in backticks; `code` spans
 * marked with backticks show as code in Markdown and plain in --help.
 *
 * A program of its own (bench/allreduce.c, bench/loader.c) describes its
 * options the same way: .program names it, so that its messages begin
 * "bench_loader:" rather than "dstrain NAME:"; an option may keep another
 * tool's one-letter name beside its long one (DS_FLAG_ARG_SHORT: -n 20,
 * -n20, as nccl-tests' -b -e -f -n -w -d); ds_flags_num, _int and _choice
 * check the current option's argument and name the option as it was typed;
 * ds_flags_quiet silences every message (the ranks but 0 of an MPI job). */
#ifndef DS_FLAGS_H
#define DS_FLAGS_H

#include <getopt.h>
#include <stdio.h>

typedef struct {
    const char *name;      /* long name without "--"; an operand's words as shown */
    int has_arg;           /* 1: takes an argument (required), 0: a switch */
    const char *metavar;   /* the argument in help: "N", "cpu|cuda"; NULL for a switch */
    const char *def;       /* the default, as text ("8", "no limit"); NULL: none to tell */
    const char *help;      /* what it does, in a sentence or a few */
    int id;                /* ds_flags_next's value for it (getopt's val) */
    const char *section;   /* a heading entry: its title (name is NULL) */
    const char *more;      /* details for the reference (docs/cli.md) only, or NULL */
    int hidden;            /* 1: accepted, but in neither help (internal) */
    int operand;           /* 1: a positional argument, shown but not parsed */
    char short_name;       /* a one-letter alias (-b), or 0: none (DS_FLAG_ARG_SHORT) */
} ds_flag;

#define DS_FLAG_ARG(ID, NAME, METAVAR, DEF, HELP) \
    {.name = (NAME), .has_arg = 1, .metavar = (METAVAR), .def = (DEF), .help = (HELP), .id = (ID)}
/* An option that also answers to -LETTER VALUE and -LETTERVALUE. */
#define DS_FLAG_ARG_SHORT(ID, LETTER, NAME, METAVAR, DEF, HELP)                                    \
    {.name = (NAME), .has_arg = 1, .metavar = (METAVAR), .def = (DEF), .help = (HELP), .id = (ID), \
     .short_name = (LETTER)}
#define DS_FLAG_SWITCH(ID, NAME, HELP) {.name = (NAME), .help = (HELP), .id = (ID)}
#define DS_FLAG_SECTION(TITLE) {.section = (TITLE)}
#define DS_FLAG_OPERAND(WORDS, HELP) {.name = (WORDS), .help = (HELP), .operand = 1}
#define DS_FLAG_END {0}

typedef struct {
    const char *name;      /* "train": dstrain train */
    int (*run)(int argc, char **argv);   /* the command (argv[0] is its name): exit status */
    const char *summary;   /* one line, for dstrain --help and the reference's list */
    const char *usage;     /* synopsis, lines separated by \n, each "dstrain ..." */
    const char *about;     /* a paragraph after the synopsis (wrapped), or NULL */
    const ds_flag *flags;  /* ends with DS_FLAG_END */
    const char *notes;     /* a paragraph after the options (wrapped), or NULL */
    const char *program;   /* a program of its own ("bench_loader"): its messages begin
                            * "bench_loader:", not "dstrain NAME:"; NULL for a command */
} ds_flag_cmd;

#define DS_FLAGS_MAX 96    /* options in one table, --help included */
#define DS_FLAGS_GO (-1)   /* ds_flags_begin: go on parsing */
#define DS_FLAG_ID_HELP (-100)

typedef struct {
    const ds_flag_cmd *cmd;
    int argc;
    char **argv;
    struct option opts[DS_FLAGS_MAX + 1];
    const ds_flag *ents[DS_FLAGS_MAX + 1];   /* opts[i]'s entry */
    char shorts[2 * DS_FLAGS_MAX + 1];       /* getopt's string of the one-letter names */
    const ds_flag *cur;                      /* the option ds_flags_next returned last */
    char typed[72];                          /* how it was named: "--iters" or "-n" */
} ds_flags;

/* Checks argv[1..] (argv[0] is the command's name) against cmd's table, in
 * order: at --help or -h prints the help to stdout and returns 0; at an
 * unknown or abbreviated option, a switch given =VALUE or an option lacking
 * its argument prints the error and a hint to --help to stderr and returns
 * 2; else prepares getopt_long (optind, opterr) and returns DS_FLAGS_GO. */
int ds_flags_begin(ds_flags *p, const ds_flag_cmd *cmd, int argc, char **argv);
/* The next option's id (its argument in optarg), or -1 when none is left;
 * the operands are then argv[optind..argc-1] (getopt_long moves them last). */
int ds_flags_next(ds_flags *p);
/* For the switch's default: names the option whose id c the command does not
 * handle (a bug) and returns 2. */
int ds_flags_unhandled(const ds_flags *p, int c);

/* The option ds_flags_next returned last, as the command line named it:
 * "--iters", or "-n" when given by its letter. */
const char *ds_flags_opt(const ds_flags *p);
/* The current option's argument (optarg) checked: a number in [lo, hi]
 * (ds_cli_num's rule), an integer in [lo, hi], one of names (NULL-ended; its
 * index). 0, or -1 after saying why to stderr as ds_cli_num does:
 * "dstrain bench: --batch x: expected ...", "bench_allreduce: -n 0: ...". */
int ds_flags_num(const ds_flags *p, double lo, double hi, double *out);
int ds_flags_int(const ds_flags *p, long lo, long hi, long *out);
int ds_flags_choice(const ds_flags *p, const char *const *names, int *out);
/* Says that the current option's argument is wrong: "PREFIX: OPTION ARG: "
 * and why (printf's fmt), to stderr; returns -1. */
int ds_flags_bad(const ds_flags *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A usage error not tied to one argument ("--op mpi takes no --transport
 * nccl"): "PREFIX: " and the message, to stderr; returns 2. */
int ds_flags_error(const ds_flags *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* After the option loop of a program that takes no operand: 2 when an
 * option was bad (bad != 0: already reported) or an operand is left
 * (reported here), else 0. */
int ds_flags_done(const ds_flags *p, int bad, int argc, char **argv);
/* 1: from now on the functions above, ds_flags_begin's --help included,
 * print nothing (an MPI job's ranks but 0, which parse the same words);
 * 0: they print again. */
void ds_flags_quiet(int quiet);

/* cmd's --help text. */
void ds_flags_help(FILE *f, const ds_flag_cmd *cmd);
/* cmd's section of the configuration reference: a heading, the synopsis,
 * one table (option, argument, default, meaning), the notes. */
void ds_flags_markdown(FILE *f, const ds_flag_cmd *cmd);
/* Help text (help, about, notes, summaries, defaults) is prose in which
 * `code` may be marked with backticks: */
/* s as plain text from column col, wrapped before column 80 and going on at
 * column indent ("\n" breaks too), backticks dropped; returns the column. */
int ds_flags_text(FILE *f, const char *s, int col, int indent);
/* s as Markdown inline text for a table cell: `code` kept (| escaped), each
 * bare --flag or --flag=VALUE put in backticks, | * \ [ < escaped. */
void ds_flags_md_text(FILE *f, const char *s);

/* The names among names[0..n) that typed[0..len) most likely meant, at most
 * max, in their order, the first rule that gives any:
 *   1. those that typed is the beginning of (an abbreviation: --bat), when
 *      there are at most max of them;
 *   2. the nearest by edit distance (insertion, deletion, substitution, or
 *      swapping two neighbours: 1 each; --bach, --precison), when it is at
 *      most 1 for a name typed in up to 4 characters, 2 beyond;
 *   3. those that are whole words of typed between hyphens (--batch-size).
 * Their indexes go to pick; returns how many (0: no suggestion). */
int ds_flags_suggest(const char *typed, size_t len, const char *const *names, int n, int *pick,
                     int max);
/* "--a", "--a or --b", "--a, --b or --c" for the picked names (prefix "--"
 * or ""), to f. */
void ds_flags_print_choices(FILE *f, const char *prefix, const char *const *names, const int *pick,
                            int k);

#endif
