/* progress.c - dstrain train's progress bar on rank 0's terminal; see
 * progress.h. */
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void ds_progress_start(ds_progress *p, int on, long first_step)
{
    *p = (ds_progress){.on = on, .first_step = first_step, .loss = NAN, .t_start = now_s()};
}

/* seconds as H:MM:SS or M:SS into out [32] */
static void clock_text(double s, char *out)
{
    long t = s > 0 && s < 1e8 ? (long)(s + 0.5) : 0;
    if (t >= 3600)
        snprintf(out, 32, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(out, 32, "%ld:%02ld", t / 60, t % 60);
}

void ds_progress_step(ds_progress *p, const ds_step_metrics *s, long total, long per_epoch)
{
    if (!p->on)
        return;
    const double t = now_s(), a = 0.1;
    if (s->step == p->first_step + 1)
        p->t_first = t;   /* the first step pays for warming up: the time left starts after it */
    if (isfinite(s->loss))   /* a skipped step's NaN or Inf stays out of the mean */
        p->loss = isnan(p->loss) ? s->loss : (1 - a) * p->loss + a * s->loss;
    p->utt_s = p->utt_s <= 0 ? s->samples_per_s : (1 - a) * p->utt_s + a * s->samples_per_s;
    if (s->step < total && t - p->last_draw < 0.2)
        return;
    p->last_draw = t;
    const double frac = total > 0 ? (double)s->step / total : 0;
    char bar[32], left[32] = "?";
    const int width = 24, full = (int)(frac * width);
    for (int i = 0; i < width; i++)
        bar[i] = i < full ? '#' : '.';
    bar[width] = '\0';
    const long done = s->step - p->first_step - 1;
    if (s->step >= total)
        clock_text(t - p->t_start, left);
    else if (done > 0)
        clock_text((t - p->t_first) / done * (total - s->step), left);
    char epoch[48] = "", loss[24] = "-";   /* epochs counted from 0, as every other line */
    if (per_epoch > 0)
        snprintf(epoch, sizeof epoch, "epoch %d of %ld ", s->epoch,
                 (total + per_epoch - 1) / per_epoch);
    if (!isnan(p->loss))   /* no finite loss yet: "-" */
        snprintf(loss, sizeof loss, "%.2f", p->loss);
    char line[192];
    snprintf(line, sizeof line, "%s[%s] %3.0f%%  step %ld/%ld  loss %s  %.1f utt/s  %s %s", epoch,
             bar, 100 * frac, s->step, total, loss, p->utt_s,
             s->step < total ? "ETA" : "done in", left);
    ds_log_print_bar(line, s->step >= total);
}
