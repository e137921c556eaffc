/* ops_f32.c - the CPU ops in float32: every family's body (ops_families.inc)
 * compiled for this dtype, once per instruction set (CMake's
 * dstrain_cpu_ops_<set>), and the float32 table. DS_CPU_OPS is
 * ds_cpu_ops_f32_<set> (real.h); cpu_isa.c picks one set's table. */
#define DS_REAL_F32
#include "ops_families.inc"

const ds_ops DS_CPU_OPS = {
    .conv2d_work = cpu_conv2d_work,
    .lookahead_work = cpu_lookahead_work,
    .ctc_work = cpu_ctc_work,
    .conv2d_fwd = cpu_conv2d_fwd,
    .conv2d_bwd = cpu_conv2d_bwd,
    .mask = cpu_mask,
    .bn_moments = cpu_bn_moments,
    .bn_fwd_train = cpu_bn_fwd_train,
    .bn_fwd_eval = cpu_bn_fwd_eval,
    .bn_bwd_moments = cpu_bn_bwd_moments,
    .bn_bwd_train = cpu_bn_bwd_train,
    .bn_bwd_eval = cpu_bn_bwd_eval,
    .hardtanh_fwd = cpu_hardtanh_fwd,
    .hardtanh_bwd = cpu_hardtanh_bwd,
    .linear_fwd = cpu_linear_fwd,
    .linear_bwd = cpu_linear_bwd,
    .conv_to_seq = cpu_conv_to_seq,
    .conv_to_seq_bwd = cpu_conv_to_seq_bwd,
    .lookahead_fwd = cpu_lookahead_fwd,
    .lookahead_bwd = cpu_lookahead_bwd,
    .rnn_plan = cpu_rnn_plan,
    .rnn_plan_destroy = cpu_rnn_plan_destroy,
    .rnn_fwd = cpu_rnn_fwd,
    .rnn_bwd = cpu_rnn_bwd,
    .ctc_loss = cpu_ctc_loss,
    .argmax = cpu_argmax,
    .loss_total = cpu_loss_total,
    .sumsq = cpu_sumsq,
    .sgd_step = cpu_sgd_step,
    .adamw_step = cpu_adamw_step,
};
