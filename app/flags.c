/* flags.c - a command's option table as getopt_long's array, --help
 * text and Markdown reference, and the errors for a wrong command line
 * (flags.h). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"

#define WIDTH 80        /* --help lines */
#define TEXT_COL 24     /* where an option's help text starts */

static const ds_flag help_flag = {.name = "help", .help = "print these options and exit",
                                  .id = DS_FLAG_ID_HELP};

/* ---- messages ---- */

static int g_quiet;

void ds_flags_quiet(int quiet) { g_quiet = quiet; }

/* f, or where nothing shows while quiet. */
static FILE *to(FILE *f)
{
    static FILE *null;
    if (!g_quiet)
        return f;
    if (!null)
        null = fopen("/dev/null", "w");
    return null ? null : f;
}

/* What a message of cmd begins with: "dstrain train", "bench_loader". */
static void prefix(FILE *f, const ds_flag_cmd *cmd)
{
    if (cmd->program)
        fputs(cmd->program, f);
    else
        fprintf(f, "dstrain %s", cmd->name);
}

/* 1 when some entry of cmd has a one-letter name. */
static int has_shorts(const ds_flag_cmd *cmd)
{
    for (const ds_flag *f = cmd->flags; f->name || f->section; f++)
        if (f->name && !f->operand && f->short_name)
            return 1;
    return 0;
}

/* ---- suggestions ---- */

/* Edit distance (optimal string alignment: a swap of neighbours is 1). */
static int distance(const char *a, size_t la, const char *b, size_t lb)
{
    enum { M = 64 };
    if (la >= M || lb >= M)
        return M;
    int d[M][M];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            const int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

int ds_flags_suggest(const char *typed, size_t len, const char *const *names, int n, int *pick,
                     int max)
{
    int k = 0;
    if (len > 0) {   /* abbreviations */
        for (int i = 0; i < n; i++)
            if (strlen(names[i]) > len && !strncmp(names[i], typed, len)) {
                if (k == max) {
                    k = 0;
                    break;
                }
                pick[k++] = i;
            }
        if (k > 0)
            return k;
    }
    const int limit = len <= 4 ? 1 : 2;
    int best = limit + 1;
    for (int i = 0; i < n; i++) {
        const int d = distance(typed, len, names[i], strlen(names[i]));
        if (d < best) {
            best = d;
            k = 0;
        }
        if (d == best && k < max)
            pick[k++] = i;
    }
    if (best <= limit)
        return k;
    k = 0;   /* a name as a whole word of typed: --batch-size, --num-epochs */
    for (int i = 0; i < n && k < max; i++) {
        const size_t l = strlen(names[i]);
        for (size_t at = 0; at + l <= len; at++)
            if ((at == 0 || typed[at - 1] == '-') && (at + l == len || typed[at + l] == '-') &&
                !strncmp(typed + at, names[i], l)) {
                pick[k++] = i;
                break;
            }
    }
    return k;
}

void ds_flags_print_choices(FILE *f, const char *prefix, const char *const *names, const int *pick,
                            int k)
{
    for (int i = 0; i < k; i++)
        fprintf(f, "%s%s%s", prefix, names[pick[i]], i + 2 < k ? ", " : i + 1 < k ? " or " : "");
}

/* ---- parsing ---- */

/* The entry for an option named name[0..len), --help included; NULL if none. */
static const ds_flag *find(const ds_flag_cmd *cmd, const char *name, size_t len)
{
    for (const ds_flag *f = cmd->flags; f->name || f->section; f++)
        if (f->name && !f->operand && strlen(f->name) == len && !strncmp(f->name, name, len))
            return f;
    return strlen(help_flag.name) == len && !strncmp(name, help_flag.name, len) ? &help_flag : NULL;
}

/* The entry whose one-letter name is c; NULL if none. */
static const ds_flag *find_short(const ds_flag_cmd *cmd, char c)
{
    for (const ds_flag *f = cmd->flags; f->name || f->section; f++)
        if (f->name && !f->operand && f->short_name && f->short_name == c)
            return f;
    return NULL;
}

static void hint(const ds_flag_cmd *cmd)
{
    FILE *e = to(stderr);
    fputc('(', e);
    prefix(e, cmd);
    fprintf(e, " --help lists its options)\n");
}

/* "PROGRAM: MESSAGE" and the --help hint on stderr; returns 2, the exit
 * status of a bad command line. */
static int refuse(const ds_flag_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(const ds_flag_cmd *cmd, const char *fmt, ...)
{
    FILE *e = to(stderr);
    prefix(e, cmd);
    fputs(": ", e);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(e, fmt, ap);
    va_end(ap);
    fputc('\n', e);
    hint(cmd);
    return 2;
}

/* arg: the word as given; name[0..len): the option's name in it. */
static int unknown(const ds_flag_cmd *cmd, const char *arg, const char *name, size_t len)
{
    const char *names[DS_FLAGS_MAX];
    int n = 0, pick[4];
    for (const ds_flag *f = cmd->flags; f->name || f->section; f++)
        if (f->name && !f->operand && !f->hidden && n < DS_FLAGS_MAX - 1)
            names[n++] = f->name;
    names[n++] = help_flag.name;
    const int k = ds_flags_suggest(name, len, names, n, pick, 4);
    FILE *e = to(stderr);
    prefix(e, cmd);
    fprintf(e, ": unknown option %.*s", (int)(name - arg + len), arg);
    if (k > 0) {
        fprintf(e, "; did you mean ");
        ds_flags_print_choices(e, "--", names, pick, k);
        fprintf(e, "?%s", arg[1] == '-' && !strncmp(names[pick[0]], name, len)
                              ? " (options are not abbreviated)" : "");
    }
    fprintf(e, "\n");
    hint(cmd);
    return 2;
}

/* A table's mistakes are the programmer's: said at once, on every run. */
static void check_table(const ds_flag_cmd *cmd)
{
    for (const ds_flag *f = cmd->flags; f->name || f->section; f++) {
        if (!f->name || f->operand)
            continue;
        const char *why = NULL;
        if (f->id == 0 || f->id == '?' || f->id == ':' || f->id == DS_FLAG_ID_HELP || f->id == -1)
            why = "a reserved id";
        else if (!strcmp(f->name, help_flag.name))
            why = "a reserved name (every table has it)";
        else if (f->has_arg != (f->metavar != NULL) || !f->help || !*f->help)
            why = "an argument without a metavar, or no help";
        else if (find(cmd, f->name, strlen(f->name)) != f)
            why = "a name given twice";
        else if (f->short_name && (!isalnum((unsigned char)f->short_name) || f->short_name == 'h' ||
                                   !f->has_arg))
            why = "a one-letter name that is not a letter or digit, is h, or is on a switch";
        else if (f->short_name && find_short(cmd, f->short_name) != f)
            why = "a one-letter name given twice";
        for (const ds_flag *g = f + 1; !why && (g->name || g->section); g++)
            if (g->name && !g->operand && g->id == f->id)
                why = "an id given twice";
        if (why) {
            prefix(stderr, cmd);
            fprintf(stderr, ": option table: --%s has %s\n", f->name, why);
            abort();
        }
    }
}

int ds_flags_begin(ds_flags *p, const ds_flag_cmd *cmd, int argc, char **argv)
{
    int n = 0, ns = 0;
    check_table(cmd);
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    p->cur = NULL;
    p->typed[0] = 0;
    for (const ds_flag *f = cmd->flags; f->name || f->section; f++)
        if (f->name && !f->operand) {
            if (n == DS_FLAGS_MAX - 1) {
                prefix(stderr, cmd);
                fprintf(stderr, ": more than %d options: raise DS_FLAGS_MAX\n", DS_FLAGS_MAX);
                abort();
            }
            p->ents[n] = f;
            p->opts[n++] = (struct option){f->name, f->has_arg ? required_argument : no_argument,
                                           NULL, f->id};
            if (f->short_name) {
                p->shorts[ns++] = f->short_name;
                p->shorts[ns++] = ':';
            }
        }
    p->shorts[ns] = 0;
    p->ents[n] = &help_flag;
    p->opts[n++] = (struct option){help_flag.name, no_argument, NULL, DS_FLAG_ID_HELP};
    p->opts[n] = (struct option){0, 0, 0, 0};
    /* The words as getopt_long will take them (options anywhere, operands
     * moved last, "--" ends the options), each option matched whole. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            break;
        if (a[0] != '-' || !a[1])
            continue;   /* an operand */
        if (!strcmp(a, "-h")) {
            ds_flags_help(to(stdout), cmd);
            return 0;
        }
        const ds_flag *s = a[1] != '-' ? find_short(cmd, a[1]) : NULL;
        if (s && !a[2] && ++i == argc)   /* -n 20 or -n20 */
            return refuse(cmd, "option -%c needs an argument: -%c %s", s->short_name,
                          s->short_name, s->metavar);
        if (s)
            continue;
        if (a[1] != '-')   /* -batch: one dash */
            return unknown(cmd, a, a + 1, strlen(a + 1));
        const char *name = a + 2;
        const size_t len = strcspn(name, "=");
        const ds_flag *f = find(cmd, name, len);
        if (!f)
            return unknown(cmd, a, name, len);
        if (f == &help_flag && !name[len]) {
            ds_flags_help(to(stdout), cmd);
            return 0;
        }
        if (!f->has_arg && name[len])
            return refuse(cmd, "option --%s takes no argument (given %s)", f->name, a);
        if (f->has_arg && !name[len] && ++i == argc)
            return refuse(cmd, "option --%s needs an argument: --%s %s", f->name, f->name,
                          f->metavar);
    }
    optind = 1;
    opterr = 0;
    return DS_FLAGS_GO;
}

int ds_flags_next(ds_flags *p)
{
    int li = -1;
    const int c = getopt_long(p->argc, p->argv, p->shorts, p->opts, &li);
    p->cur = NULL;
    p->typed[0] = 0;
    if (c == '?' || c == ':') {   /* ds_flags_begin lets none through */
        FILE *e = to(stderr);
        prefix(e, p->cmd);
        fprintf(e, ": bad option %s\n",
                optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "?");
        hint(p->cmd);
        return c;
    }
    if (c == -1)
        return c;
    if (li >= 0) {
        p->cur = p->ents[li];
        snprintf(p->typed, sizeof p->typed, "--%s", p->cur->name);
    } else {   /* a one-letter name: its entry's id */
        p->cur = find_short(p->cmd, (char)c);
        snprintf(p->typed, sizeof p->typed, "-%c", c);
    }
    /* no option takes an empty value: --log '' (an unset variable in a
     * script) wrote nothing and said nothing */
    if (p->cur && p->cur->has_arg && optarg && !*optarg) {
        FILE *e = to(stderr);
        prefix(e, p->cmd);
        fprintf(e, ": option %s is given an empty value: it takes %s\n", p->typed,
                p->cur->metavar ? p->cur->metavar : "a value");
        hint(p->cmd);
        return '?';
    }
    if (li < 0 && p->cur)
        return p->cur->id;
    return c;
}

const char *ds_flags_opt(const ds_flags *p) { return p->typed[0] ? p->typed : "?"; }

static void vsay(const ds_flags *p, const char *opt_arg, const char *fmt, va_list ap)
{
    FILE *e = to(stderr);
    prefix(e, p->cmd);
    if (opt_arg)
        fprintf(e, ": %s %s", ds_flags_opt(p), opt_arg);
    fputs(": ", e);
    vfprintf(e, fmt, ap);
    fputc('\n', e);
}

int ds_flags_bad(const ds_flags *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(p, optarg ? optarg : "", fmt, ap);
    va_end(ap);
    return -1;
}

int ds_flags_error(const ds_flags *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(p, NULL, fmt, ap);
    va_end(ap);
    return 2;
}

int ds_flags_done(const ds_flags *p, int bad, int argc, char **argv)
{
    if (bad)
        return 2;   /* reported where it was read */
    if (optind < argc)
        return ds_flags_error(p, "unexpected argument \"%s\"", argv[optind]);
    return 0;
}

int ds_flags_num(const ds_flags *p, double lo, double hi, double *out)
{
    const char *s = optarg ? optarg : "";
    char *end;
    *out = strtod(s, &end);
    if (end == s || *end || !(*out >= lo && *out <= hi))   /* NaN fails both */
        return ds_flags_bad(p, "expected a number in [%g, %g]", lo, hi);
    return 0;
}

int ds_flags_int(const ds_flags *p, long lo, long hi, long *out)
{
    const char *s = optarg ? optarg : "";
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    if (errno || end == s || *end || *out < lo || *out > hi)
        return ds_flags_bad(p, "expected an integer in [%ld, %ld]", lo, hi);
    return 0;
}

int ds_flags_choice(const ds_flags *p, const char *const *names, int *out)
{
    const char *s = optarg ? optarg : "";
    int n = 0;
    for (; names[n]; n++)
        if (!strcmp(s, names[n])) {
            *out = n;
            return 0;
        }
    char list[512];
    size_t at = 0;
    list[0] = 0;
    for (int i = 0; i < n && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", names[i],
                               i + 2 < n ? ", " : i + 1 < n ? " or " : "");
    return ds_flags_bad(p, "expected %s", list);
}

int ds_flags_unhandled(const ds_flags *p, int c)
{
    if (c == '?' || c == ':')
        return 2;   /* said by ds_flags_next */
    const char *name = "?";
    for (const ds_flag *f = p->cmd->flags; f->name || f->section; f++)
        if (f->name && !f->operand && f->id == c)
            name = f->name;
    FILE *e = to(stderr);
    prefix(e, p->cmd);
    fprintf(e, ": option --%s is in the table but not handled (a bug)\n", name);
    return 2;
}

/* ---- --help ---- */

int ds_flags_text(FILE *f, const char *s, int col, int indent)
{
    while (*s) {
        if (*s == '\n') {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            s++;
            continue;
        }
        const size_t n = strcspn(s, " \n");
        int w = 0;   /* what shows: the backticks go */
        for (size_t i = 0; i < n; i++)
            w += s[i] != '`';
        if (col > indent && col + 1 + w > WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        for (size_t i = 0; i < n; i++)
            if (s[i] != '`')
                fputc(s[i], f);
        col += w;
        s += n;
        while (*s == ' ')
            s++;
    }
    return col;
}

/* shorts: the table has one-letter names, shown first ("-b, --minbytes B",
 * "    --op OP", "-h, --help"). */
static void help_entry(FILE *f, const ds_flag *e, int shorts)
{
    int col;
    if (shorts && !e->operand)
        col = fprintf(f, "  %c%c%s--%s%s%s", e->short_name || e == &help_flag ? '-' : ' ',
                      e == &help_flag ? 'h' : e->short_name ? e->short_name : ' ',
                      e->short_name || e == &help_flag ? ", " : "  ", e->name,
                      e->metavar ? " " : "", e->metavar ? e->metavar : "");
    else
        col = fprintf(f, "  %s%s%s%s%s", e->operand ? "" : "--", e->name,
                      e == &help_flag ? ", -h" : "", e->metavar ? " " : "",
                      e->metavar ? e->metavar : "");
    if (col < TEXT_COL)
        col += fprintf(f, "%*s", TEXT_COL - col, "");
    else {
        fprintf(f, "\n%*s", TEXT_COL, "");
        col = TEXT_COL;
    }
    col = ds_flags_text(f, e->help, col, TEXT_COL);
    if (e->def) {
        char d[512];
        snprintf(d, sizeof d, "(default %s)", e->def);
        ds_flags_text(f, d, col, TEXT_COL);
    }
    fputc('\n', f);
}

static void usage(FILE *f, const ds_flag_cmd *cmd)
{
    const char *u = cmd->usage;
    for (int first = 1; *u; first = 0) {
        const size_t n = strcspn(u, "\n");
        fprintf(f, "%s%.*s\n", first ? "usage: " : "       ", (int)n, u);
        u += n + (u[n] == '\n');
    }
}

void ds_flags_help(FILE *f, const ds_flag_cmd *cmd)
{
    usage(f, cmd);
    fputc('\n', f);
    if (cmd->about) {
        ds_flags_text(f, cmd->about, 0, 0);
        fputs("\n\n", f);
    }
    const int shorts = has_shorts(cmd);
    for (const ds_flag *e = cmd->flags; e->name || e->section; e++) {
        if (e->section)
            fprintf(f, "%s:\n", e->section);
        else if (!e->hidden)
            help_entry(f, e, shorts);
    }
    help_entry(f, &help_flag, shorts);
    if (cmd->notes) {
        fputc('\n', f);
        ds_flags_text(f, cmd->notes, 0, 0);
        fputc('\n', f);
    }
}

/* ---- Markdown ---- */

void ds_flags_md_text(FILE *f, const char *s)
{
    for (size_t i = 0; s[i]; i++) {
        const char c = s[i];
        if (c == '`') {   /* code as written, | escaped for the table */
            fputc('`', f);
            for (i++; s[i] && s[i] != '`'; i++)
                fprintf(f, s[i] == '|' ? "\\|" : "%c", s[i]);
            fputc('`', f);
            if (!s[i])
                break;
        } else if (c == '-' && s[i + 1] == '-' && isalpha((unsigned char)s[i + 2]) &&
                   (i == 0 || strchr(" (/\n", s[i - 1]))) {   /* --flag, --flag=VALUE */
            size_t n = 2;
            while (isalnum((unsigned char)s[i + n]) || s[i + n] == '-')
                n++;
            if (s[i + n] == '=')
                while (s[i + n] && !strchr(" ,;:)", s[i + n]))
                    n++;
            fprintf(f, "`%.*s`", (int)n, s + i);
            i += n - 1;
        } else if (strchr("|*\\[<", c)) {
            fprintf(f, "\\%c", c);
        } else {
            fputc(c == '\n' ? ' ' : c, f);
        }
    }
}

/* Code in a table cell: `text` with | escaped. */
static void md_code(FILE *f, const char *s)
{
    fputc('`', f);
    for (; *s; s++)
        fprintf(f, *s == '|' ? "\\|" : "%c", *s);
    fputc('`', f);
}

static void md_row(FILE *f, const ds_flag *e)
{
    fputs("| ", f);
    if (e->operand && e->name[0] == '(')   /* (none) */
        ds_flags_md_text(f, e->name);
    else if (e->operand)
        md_code(f, e->name);
    else {
        if (e->short_name)
            fprintf(f, "`-%c`, ", e->short_name);
        fprintf(f, "`--%s`", e->name);
        if (e == &help_flag)
            fputs(", `-h`", f);
    }
    fputs(" | ", f);
    if (e->metavar)
        md_code(f, e->metavar);
    fputs(" | ", f);
    if (e->def)
        ds_flags_md_text(f, e->def);
    fputs(" | ", f);
    ds_flags_md_text(f, e->help);
    if (e->more) {
        fputs(e->help[strlen(e->help) - 1] == '.' ? " " : ". ", f);
        ds_flags_md_text(f, e->more);
    }
    fputs(" |\n", f);
}

void ds_flags_markdown(FILE *f, const ds_flag_cmd *cmd)
{
    fputs("### ", f);
    prefix(f, cmd);
    fputs("\n\n```\n", f);
    usage(f, cmd);
    fputs("```\n\n", f);
    if (cmd->about) {
        ds_flags_md_text(f, cmd->about);
        fputs("\n\n", f);
    }
    fputs("| option | argument | default | meaning |\n|---|---|---|---|\n", f);
    for (const ds_flag *e = cmd->flags; e->name || e->section; e++) {
        if (e->section) {
            fputs("| **", f);
            ds_flags_md_text(f, e->section);
            fputs("** | | | |\n", f);
        } else if (!e->hidden)
            md_row(f, e);
    }
    md_row(f, &help_flag);
    if (cmd->notes) {
        fputc('\n', f);
        ds_flags_md_text(f, cmd->notes);
        fputc('\n', f);
    }
}
