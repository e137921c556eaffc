/* train.c - the training loop: epochs of steps over synthetic data or HDF5
 * feature files, each step's metrics read after the next step is launched,
 * validation and checkpoints at the end of each epoch. Its data, its ranks
 * and the step itself live in train_data.c, ranks.c and stepper.c. */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "cpu_binding.h"
#include "ckpt_writer.h"
#include "file.h"
#include "h5_lock.h"
#include "evaluate.h"
#include "rank_agree.h"
#include "run_config.h"
#include "train_run.h"

void ds_train_run_close(run_state *r)
{
    ds_ckpt_writer_destroy(r->loop.ckpt);   /* a save in flight ends first, in the locked folder */
    r->loop.ckpt = NULL;
    ds_log_close(&r->loop.log);
    ds_dir_lock_release(&r->loop.ckpt_lock);
    free(r->loop.ckpt_dir);
    r->loop.ckpt_dir = NULL;
    ds_train_data_close(&r->data);
    ds_ranks_close(&r->ranks);
    ds_stepper_destroy(r->m.stepper);
    ds_score_batch_destroy(r->loop.scorer);
    ds_optim_destroy(r->m.optim);
    ds_model_destroy(r->m.model);
    if (r->m.ctx)
        r->m.be->ctx_destroy(r->m.ctx);
}

/* A GPU rank's threads onto the CPUs nearest its GPU (cpu_binding.h),
 * unless --cpu-bind none; said on rank 0's console. */
static ds_status bind_cpus(run_state *r, int device)
{
    const ds_backend *be = r->m.be;
    if (r->o->no_cpu_bind || !be->device_pci_bus_id)
        return DS_OK;
    char bus[64];
    ds_cpu_binding b;
    DS_TRY(be->device_pci_bus_id(device, bus, sizeof bus));
    DS_TRY(ds_cpu_bind_rank(r->o->world, "/sys", bus, &b));
    ds_log_print("rank 0's threads: %s (GPU %s; --cpu-bind none leaves them)\n", b.why, bus);
    return DS_OK;
}

static ds_status open_backend(run_state *r)
{
    const ds_train_opts *o = r->o;
    r->m.be = ds_backend_get(o->device);
    if (!r->m.be)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "--device %s: %s", o->device, ds_backend_missing(o->device));
    const int device = o->world && o->world->device > 0 ? o->world->device : 0;   /* -1: CPU */
    ds_ctx_opts compute = o->compute;
    if (r->ranks.ranks > 1)   /* steps are not captured across ranks (stepper.h): no padded RNN for nothing */
        compute.capturable = 0;
    DS_TRY(r->m.be->ctx_create(device, &compute, &r->m.ctx));
    return bind_cpus(r, device);
}

/* Out of memory while planning (where: the backend's device or the host's
 * batches): say which of the run's limits to lower. */
static ds_status planned(run_state *r, const ds_model_limits *lim, const char *where, ds_status st)
{
    if (st != DS_ERR_MEM)
        return st;
    char why[1024];
    snprintf(why, sizeof why, "%s", ds_status_last_error());
    ds_status_clear_error();   /* this message wraps the allocator's */
    return DS_FAIL(DS_ERR_MEM, "out of memory on %s planning batch %d, length limit %d frames, "
                   "labels up to %d, precision %s: %s; lower --batch, --max-duration (or "
                   "--max-frames) or the precision",
                   where, lim->batch, lim->frames, lim->label_len,
                   ds_dtype_name(r->o->precision), why);
}

/* What the backend holds once every buffer of the run is planned. */
static void report_memory(run_state *r)
{
    ds_backend_counters c;
    r->m.be->counters(r->m.ctx, &c);
    ds_log_print("%s memory planned: %.1f MiB in use, %.1f MiB at peak\n", r->o->device,
             c.bytes_in_use / 1048576.0, c.bytes_peak / 1048576.0);
}

/* The run's options as checkpoints store them (run_config.h). */
static ds_status describe_run(run_state *r)
{
    const ds_train_opts *o = r->o;
    char features[256];
    if (o->train_path)
        snprintf(features, sizeof features, "%s %d Hz, window %g s, stride %g s, %d mels, %d mfcc",
                 ds_feature_type_name(r->data.feat.type), r->data.feat.sample_rate,
                 r->data.feat.window_size_s, r->data.feat.window_stride_s, r->data.feat.n_mels,
                 r->data.feat.n_mfcc);
    else
        snprintf(features, sizeof features, "synthetic");
    char fp[16];
    if (r->data.train)
        ds_dataset_fingerprint(r->data.train, fp, sizeof fp);
    return ds_run_config_text(o, r->ranks.ranks, features,
                              o->train_path ? r->data.n_keep : o->synthetic_utts,
                              r->data.train ? fp : NULL, r->loop.run_config, sizeof r->loop.run_config);
}

/* Rank 0: --checkpoint-dir made ready and resolved once (a linked cluster
 * folder included): every save goes to that real path and that folder. */
static ds_status open_checkpoint_dir(run_state *r)
{
    const char *dir = r->o->checkpoint_dir;
    /* the longest name written there: step-NNNNNNNN.h5 and a temporary's part */
    const size_t names = sizeof "step-00000000.h5" + 8 + DS_TMP_SUFFIX_LEN;
    DS_TRY(ds_file_dir_ready(dir, "checkpoint directory"));
    DS_TRY(ds_file_dir_resolve(dir, "checkpoint directory", names, &r->loop.ckpt_dir,
                               &r->loop.ckpt_dir_id));
    struct stat sb;
    if (lstat(dir, &sb) == 0 && S_ISLNK(sb.st_mode))
        ds_log_print("checkpoints go to %s (--checkpoint-dir %s, resolved once)\n",
                     r->loop.ckpt_dir, dir);
    return DS_OK;
}

/* --cuda-graphs: the stepper captures each shape's step, or says why not. */
static ds_status capture_steps(run_state *r)
{
    if (!r->o->compute.capturable)
        return DS_OK;
    char why[256];
    DS_TRY(ds_stepper_capture(r->m.stepper, r->o->graphs_max, why, sizeof why));
    if (r->ranks.rank == 0 && why[0])
        ds_log_print("--cuda-graphs: %s\n", why);
    else if (r->ranks.rank == 0)
        ds_log_print("--cuda-graphs: each batch shape's step is captured once and replayed, at "
                     "most %d shapes held\n", r->o->graphs_max);
    return DS_OK;
}

ds_status ds_train_run_open(const ds_train_opts *o, run_state *r)
{
    memset(r, 0, sizeof *r);
    r->o = o;
    r->ranks.rank = o->world ? o->world->rank : 0;
    r->ranks.ranks = o->world ? o->world->size : 1;
    r->pos.saved_step = r->pos.tried_step = r->pos.validated_step = -1;
    ds_model_limits lim = {.batch = o->batch};
    DS_TRY(planned(r, &lim, "the host",
                   ds_train_data_open(&r->data, o, r->ranks.rank, r->ranks.ranks, &lim)));
    /* before anything sized by the options goes between ranks (the model's
     * broadcast, the buckets), and before a backend another rank may not
     * have: a rank given other options is refused by all */
    DS_TRY(ds_rank_agree_train(r));
    DS_TRY(open_backend(r));
    r->loop.total = o->steps > 0 ? o->steps : r->data.per_epoch * (o->epochs > 0 ? o->epochs : 1);
    r->m.ocfg = o->optim;
    if (r->m.ocfg.total_steps <= 0)
        r->m.ocfg.total_steps = r->loop.total;
    ds_model_hooks hooks;
    DS_TRY(planned(r, &lim, o->device,
                   ds_model_create_hooked(&o->model, r->m.be, r->m.ctx, o->precision, &lim,
                                          ds_ranks_create_hooks(r, &hooks), &r->m.model)));
    ds_ranks_log_choices(r);
    DS_TRY(ds_model_init_params(r->m.model, o->seed));
    DS_TRY(planned(r, &lim, o->device, ds_ranks_setup(r)));
    DS_TRY(planned(r, &lim, o->device, ds_model_optim_create(r->m.model, &r->m.ocfg, &r->m.optim)));
    DS_TRY(planned(r, &lim, o->device,
                   ds_stepper_create(r->m.model, r->m.optim, &r->ranks.dist, &r->m.stepper)));
    DS_TRY(capture_steps(r));
    DS_TRY(ds_score_batch_create(&o->model, &lim, &r->loop.scorer));
    report_memory(r);
    if (!ds_h5_threadsafe()) {   /* the loader, validation and the checkpoint writer share it */
        char h5[160];
        ds_log_print("note: %s (the loader's readers take turns in it)\n",
                 ds_h5_thread_mode(h5, sizeof h5));
    }
    DS_TRY(describe_run(r));
    if (r->ranks.rank == 0 && o->checkpoint_dir) {   /* before any step, not at the first save */
        DS_TRY(open_checkpoint_dir(r));
        const char *dir = r->loop.ckpt_dir;
        /* before anything in it is removed or chosen to resume from */
        DS_TRY(ds_dir_lock_take(dir, "checkpoint directory", &r->loop.ckpt_lock));
        int removed;
        if (ds_checkpoint_remove_partial(dir, &removed) != DS_OK) {
            /* harmless where it stays: a resume never chooses it */
            ds_log_print("warning: %s; training goes on\n", ds_status_last_error());
            ds_status_clear_error();
        }
        if (removed)
            ds_log_print("removed %d partial checkpoint%s (step-N.h5.*.tmp) left by a save cut short\n",
                     removed, removed == 1 ? "" : "s");
        /* the image's host memory now: a save later cannot fail for want of it */
        DS_TRY(planned(r, &lim, "the host",
                       ds_ckpt_writer_create(r->m.model, r->m.optim, !o->checkpoint_sync, dir,
                                             &r->loop.ckpt_dir_id, o->checkpoint_keep,
                                             &r->loop.ckpt)));
    }
    DS_TRY(ds_ranks_check_shared(r));
    if (o->resume)
        DS_TRY(ds_resume_run(r));
    DS_TRY(ds_ckpt_folder_claim(r));
    ds_progress_start(&r->loop.progress, o->progress, r->pos.start_step);
    if (r->ranks.rank != 0)   /* rank 0 writes the log and the checkpoints */
        return DS_OK;
    return ds_log_open(&r->loop.log, o->log_path, r->pos.start_step > 0);   /* a resume appends */
}

/* A save that failed: with --checkpoint-error continue a warning (the
 * previous checkpoint is still whole), else the run's error. */
static ds_status save_failed(run_state *r, long step, ds_status st, const char *why_now)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", why_now);   /* may be the error about to be cleared */
    ds_status_clear_error();
    if (!r->o->checkpoint_continue)
        return DS_FAIL(st, "checkpoint at step %ld not written: %s", step, why);
    ds_log_print("warning: checkpoint at step %ld not written (%s); training goes on "
             "(--checkpoint-error continue)\n", step, why);
    ds_status_clear_error();   /* the next failure's message is its own */
    return DS_OK;
}

/* Reports the save that ended (wait: the one in flight, once it ends):
 * printed, logged with what it cost training, or its failure. Rank 0. */
static ds_status report_save(run_state *r, int wait)
{
    ds_ckpt_done d;
    if (!r->loop.ckpt || !ds_ckpt_writer_poll(r->loop.ckpt, wait, &d))
        return DS_OK;
    if (d.st != DS_OK && d.fatal)   /* never a save elsewhere, whatever --checkpoint-error says */
        return DS_FAIL(d.st, "checkpoint at step %ld not written: %s", d.step, d.msg);
    if (d.st != DS_OK)
        return save_failed(r, d.step, d.st, d.msg);
    r->pos.saved_step = d.step;
    const int sync = r->o->checkpoint_sync;
    /* training waited for the copy (and the save before it); for the write too when sync */
    const double stall = d.wait_s + d.take_s + (sync ? d.write_s : 0);
    ds_log_print("checkpoint %s (training stalled %.2f s; written in %.2f s%s)\n", d.path, stall,
             d.write_s, sync ? "" : " beside training");
    char line[1400], path[1200];
    snprintf(line, sizeof line,
             "{\"checkpoint\":%s,\"step\":%ld,\"stall_s\":%.4f,\"wait_s\":%.4f,"
             "\"take_s\":%.4f,\"write_s\":%.4f,\"async\":%s}",
             ds_log_json_str(d.path, path, sizeof path), d.step, stall, d.wait_s, d.take_s, d.write_s,
             sync ? "false" : "true");
    return ds_log_raw(&r->loop.log, line);
}

/* A checkpoint after step (counted from 1) of epoch. The run goes on at the
 * next global batch of the epoch; or, when ended (saved by epoch_end, after
 * the validation, with no batch left), at the next epoch's first, so a
 * resume neither repeats the epoch's end nor, when a save on its last step
 * came before the validation, misses it. Rank 0 copies the model out and
 * writes it beside training (--checkpoint-sync: at once); the other ranks
 * go on at once. */
static ds_status save_checkpoint(run_state *r, long step, int epoch, int ended)
{
    r->pos.tried_step = step;
    r->pos.tried_ended = ended;
    if (r->ranks.rank != 0)
        return DS_OK;
    DS_TRY(report_save(r, 1));   /* the save before: at most one in flight */
    char path[DS_PATH_MAX + 32];   /* the folder's length was checked at the start */
    snprintf(path, sizeof path, "%s/step-%08ld.h5", r->loop.ckpt_dir, step);
    ds_ckpt_info info = {.step = step, .epoch = epoch, .feat = r->data.feat, .norm = r->o->norm,
                         .next_epoch = ended ? epoch + 1 : epoch,
                         .next_batch = ended ? 0 : r->data.batch_pos, .bad_run = r->pos.bad_run};
    memcpy(info.rng, r->data.rng.s, sizeof info.rng);
    snprintf(info.run_config, sizeof info.run_config, "%s", r->loop.run_config);
    snprintf(info.run_id, sizeof info.run_id, "%s", r->loop.run_id);
    ds_fault_arm_save(step);
    ds_status st = ds_ckpt_writer_save(r->loop.ckpt, path, &info);
    if (st != DS_OK)
        return save_failed(r, step, st, ds_status_last_error());
    return r->o->checkpoint_sync ? report_save(r, 1) : DS_OK;
}

static void print_step(long total, const ds_step_metrics *s)
{
    const double loss = ds_log_printable(s->loss);
    ds_log_print("step %6ld/%ld  epoch %d  loss %8.4f  cer %5.3f  lr %.3g  |g| %8.3f  %6.1f ms  "
             "%7.1f utt/s%s\n",
             s->step, total, s->epoch, loss, s->cer, s->lr, s->grad_norm, s->step_ms,
             s->samples_per_s, s->skipped ? (isfinite(loss) ? "  (skipped: non-finite gradient)"
                                                     : "  (skipped: non-finite loss)")
                          : "");
}

/* The step must be read before the next is launched: its batch's CER is
 * printed from its logits, or the parameters after it are saved or compared. */
static int needs_sync(const run_state *r, long step)
{
    const ds_train_opts *o = r->o;
    const long n = step + 1;
    return n == r->loop.total || (o->print_every > 0 && n % o->print_every == 0) ||
           (o->check_sync > 0 && r->ranks.ranks > 1 && n % o->check_sync == 0) ||
           (o->checkpoint_dir && o->checkpoint_every > 0 && n % o->checkpoint_every == 0) ||
           (r->data.val && o->val_every > 0 && n % o->val_every == 0);
}

/* Every rank scores its share of the validation set (ds_evaluate_ranks):
 * logged, printed, and kept as the run's last validation. After a step
 * that was read before the next was launched: nothing else uses the model. */
static ds_status validate(run_state *r, long step, int epoch, ds_train_result *res)
{
    ds_eval_result ev;
    DS_TRY(ds_evaluate_ranks(r->m.model, r->data.val, r->data.val_keep, r->data.n_val,
                             r->o->batch, r->o->norm, r->ranks.ranks > 1 ? r->o->world : NULL,
                             &ev));
    r->pos.validated_step = step;
    res->val_cer = ds_score_cer(&ev.score);
    res->val_wer = ds_score_wer(&ev.score);
    res->val_loss = ev.loss;
    char line[512], loss[32];
    snprintf(line, sizeof line,
             "{\"eval\":\"val\",\"epoch\":%d,\"step\":%ld,\"loss\":%s,\"wer\":%.6f,"
             "\"cer\":%.6f,\"utterances\":%ld,\"n_inf\":%ld}",
             epoch, step, ds_log_json_num(ev.loss, loss), res->val_wer, res->val_cer,
             ev.score.utterances, ev.n_infinite);
    DS_TRY(ds_log_raw(&r->loop.log, line));
    ds_log_print("epoch %d  val loss %.4f  WER %.3f  CER %.3f  (%ld utterances, after step %ld)\n",
             epoch, ds_log_printable(ev.loss), res->val_wer, res->val_cer, ev.score.utterances, step);
    return DS_OK;
}

/* Reads the pending step's metrics; logs, prints, checks and saves it. */
static ds_status finish_step(run_state *r, ds_train_result *res)
{
    const ds_train_opts *o = r->o;
    const ds_launched p = r->loop.pending;
    ds_step_out out;
    r->loop.pending.b = NULL;
    DS_TRY(ds_stepper_collect(r->m.stepper, &out));
    ds_step_metrics s = {.step = p.step + 1, .epoch = p.epoch, .cer = -1, .batch = p.global_n,
                         .frames = p.frames, .lr = p.lr, .grad_norm = out.opt.grad_norm,
                         .skipped = out.opt.skipped, .step_ms = out.launch_ms + out.wait_ms,
                         .loss_scale = r->m.ocfg.loss_scale_window > 0 || r->m.ocfg.loss_scale != 1
                                           ? out.opt.loss_scale : 0,
                         .skipped_steps = out.opt.skips};
    DS_TRY(ds_ranks_gather_metrics(&r->ranks, o->world, &out, &s, p.global_n));
    const int report = o->print_every > 0 &&
                       ((p.step + 1) % o->print_every == 0 || p.step + 1 == r->loop.total);
    if (report) {   /* CER of this rank's batch, from the logits of this step's forward */
        ds_score sc = {0};
        DS_TRY(ds_score_batch_add(r->loop.scorer, r->m.model, p.b, &sc));
        s.cer = res->last_cer = ds_score_cer(&sc);
    }
    DS_TRY(ds_log_step(&r->loop.log, &s));
    if (report)
        print_step(r->loop.total, &s);
    ds_progress_step(&r->loop.progress, &s, r->loop.total, r->data.per_epoch);
    if (p.step == r->pos.start_step)
        res->first_loss = s.loss;
    else
        res->mean_step_ms += s.step_ms;   /* a sum until the end */
    res->last_loss = s.loss;
    res->skipped += s.skipped;
    res->steps = p.step + 1;
    /* every rank sees the same verdict (taken after the reduction): all stop together */
    r->pos.bad_run = s.skipped ? r->pos.bad_run + 1 : 0;
    if (o->max_bad_steps > 0 && r->pos.bad_run >= o->max_bad_steps)
        return DS_FAIL(DS_ERR_ARG,
                       "steps %ld to %ld all had a non-finite loss or gradient and were skipped "
                       "(--max-bad-steps %ld): stopping; the parameters are those before them, "
                       "and so is the last checkpoint",
                       p.step + 2 - r->pos.bad_run, p.step + 1, o->max_bad_steps);
    if (o->check_sync > 0 && r->ranks.ranks > 1 && (p.step + 1) % o->check_sync == 0)
        DS_TRY(ds_ranks_check_sync(r, p.step + 1));
    if (r->data.val && o->val_every > 0 && (p.step + 1) % o->val_every == 0)
        DS_TRY(validate(r, p.step + 1, p.epoch, res));
    if (o->checkpoint_dir && o->checkpoint_every > 0 && (p.step + 1) % o->checkpoint_every == 0)
        DS_TRY(save_checkpoint(r, p.step + 1, p.epoch, 0));
    return report_save(r, 0);   /* a save that ended beside this step */
}

static ds_status finish_pending(run_state *r, ds_train_result *res)
{
    return r->loop.pending.b ? finish_step(r, res) : DS_OK;
}

/* Launches step on b, then reads the step before it (now that this one is
 * queued), or this one at once when it must be. */
static ds_status run_step(run_state *r, const ds_batch *b, long step, int epoch, ds_train_result *res)
{
    const int global_n = b->n_global > 0 ? b->n_global : b->n;
    const double lr = ds_optim_lr(&r->m.ocfg, step, epoch);
    ds_fault_inject(r->ranks.rank, step + 1, r->m.stepper);
    /* dropout's masks: the run's seed, this step, this rank */
    ds_model_set_dropout_key(r->m.model, r->o->seed, (uint32_t)step, (uint32_t)r->ranks.rank);
    DS_TRY(ds_stepper_launch(r->m.stepper, b, lr));
    DS_TRY(finish_pending(r, res));
    r->loop.pending = (ds_launched){.b = b, .global_n = global_n, .frames = b->t, .epoch = epoch,
                                    .step = step, .lr = lr};
    return needs_sync(r, step) ? finish_step(r, res) : DS_OK;
}

static ds_status epoch_end(run_state *r, long step, int epoch, ds_train_result *res)
{
    if (r->data.loader) {
        ds_loader_stop(r->data.loader);
        r->data.loader = NULL;
    }
    DS_TRY(finish_pending(r, res));
    if (r->data.val && r->pos.validated_step != step)
        DS_TRY(validate(r, step, epoch, res));
    /* at the end of every epoch (and of the run), unless this step's is
     * written: again when that one was saved before the validation */
    const int ended = ds_train_data_epoch_exhausted(&r->data, epoch);
    if (r->o->checkpoint_dir && (r->pos.tried_step != step || (ended && !r->pos.tried_ended)))
        DS_TRY(save_checkpoint(r, step, epoch, ended));
    return DS_OK;
}

/* SIGTERM/SIGUSR1, agreed by every rank: read the step in flight, save a
 * checkpoint of the step count reached, and report how it stopped. */
static ds_status stop_now(run_state *r, long step, int epoch, ds_train_result *res)
{
    DS_TRY(finish_pending(r, res));
    res->stop_signal = r->ranks.stop_signal;
    if (r->o->checkpoint_dir && r->pos.tried_step != step)   /* once a step */
        DS_TRY(save_checkpoint(r, step, epoch, 0));
    DS_TRY(report_save(r, 1));   /* the job may be killed soon after: the save is whole first */
    if (r->ranks.rank == 0 && r->pos.saved_step == step)   /* not if a full disk was let pass */
        snprintf(res->stop_checkpoint, sizeof res->stop_checkpoint, "%s/step-%08ld.h5",
                 r->loop.ckpt_dir, step);
    return DS_OK;
}

/* The metrics log must not be one of the run's inputs (opening it would
 * empty that file), whatever name it is given by. */
static ds_status check_log_is_no_input(const ds_train_opts *o)
{
    const char *what[] = {"training features (--train)", "validation features (--val)",
                          "checkpoint to resume (--resume)"};
    const char *in[] = {o->train_path, o->val_path,
                        o->resume && strcmp(o->resume, "auto") != 0 ? o->resume : NULL};
    return ds_file_refuse_output_over_input("train", "metrics log (--log)", o->log_path, what, in, 3);
}

ds_status ds_train(const ds_train_opts *o, ds_train_result *res)
{
    memset(res, 0, sizeof *res);
    res->val_cer = res->val_wer = res->val_loss = res->last_cer = -1;
    DS_TRY(check_log_is_no_input(o));
    run_state r;
    ds_status st;
    ds_stop_signals_install();
    DS_TRY_GOTO(st, ds_train_run_open(o, &r), out);
    long step = r.pos.start_step;
    res->steps = res->start_step = step;
    res->total = r.loop.total;
    for (int epoch = r.pos.start_epoch; step < r.loop.total; epoch++) {
        const ds_batch *b;
        DS_TRY_GOTO(st, ds_train_data_epoch_begin(&r.data, &r.pos, epoch), out);
        while (step < r.loop.total) {
            DS_TRY_GOTO(st, ds_train_data_next_batch(&r.data, &b), out);
            if (!b)
                break;
            DS_TRY_GOTO(st, run_step(&r, b, step, epoch, res), out);
            step++;
            if (r.ranks.stop_signal) {
                DS_TRY_GOTO(st, stop_now(&r, step, epoch, res), out);
                goto out;
            }
        }
        DS_TRY_GOTO(st, epoch_end(&r, step, epoch, res), out);
    }
    DS_TRY_GOTO(st, report_save(&r, 1), out);   /* the last save is whole before the run says so */
    if (res->steps - r.pos.start_step > 1) {
        res->mean_step_ms /= res->steps - r.pos.start_step - 1;
        res->samples_per_s = o->batch * r.ranks.ranks / (res->mean_step_ms / 1e3);
    }
    ds_backend_counters c;
    r.m.be->counters(r.m.ctx, &c);
    res->mem_in_use = c.bytes_in_use;
    res->mem_peak = c.bytes_peak;
out:
    ds_train_run_close(&r);
    return st;
}
