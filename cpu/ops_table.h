/* ops_table.h - the entries of a CPU ds_ops table (src/backend.h): .OP =
 * P_OP for every op, P the prefix of one family of definitions: cpu (the
 * bodies, cpu_<op> in the family files named like their CUDA twins) or half
 * (the 16-bit wrappers of ops_half.inc). The float32, float64, float16 and
 * bfloat16 tables are each written by it, so they cannot drift apart. */
#ifndef DS_CPU_OPS_TABLE_H
#define DS_CPU_OPS_TABLE_H

#define DS_CPU_OPS_TABLE(P)                                     \
    {                                                           \
    .conv2d_work = P##_conv2d_work,                         \
    .lookahead_work = P##_lookahead_work,                   \
    .ctc_work = P##_ctc_work,                               \
    .conv2d_fwd = P##_conv2d_fwd,                           \
    .conv2d_bwd = P##_conv2d_bwd,                           \
    .mask = P##_mask,                                       \
    .bn_moments = P##_bn_moments,                           \
    .bn_fwd_train = P##_bn_fwd_train,                       \
    .bn_fwd_eval = P##_bn_fwd_eval,                         \
    .bn_bwd_moments = P##_bn_bwd_moments,                   \
    .bn_bwd_train = P##_bn_bwd_train,                       \
    .bn_bwd_eval = P##_bn_bwd_eval,                         \
    .hardtanh_fwd = P##_hardtanh_fwd,                       \
    .hardtanh_bwd = P##_hardtanh_bwd,                       \
    .dropout_fwd = P##_dropout_fwd,                         \
    .dropout_bwd = P##_dropout_bwd,                         \
    .add = P##_add,                                         \
    .linear_fwd = P##_linear_fwd,                           \
    .linear_bwd = P##_linear_bwd,                           \
    .conv_to_seq = P##_conv_to_seq,                         \
    .conv_to_seq_bwd = P##_conv_to_seq_bwd,                 \
    .context_fwd = P##_context_fwd,                         \
    .context_bwd = P##_context_bwd,                         \
    .lookahead_fwd = P##_lookahead_fwd,                     \
    .lookahead_bwd = P##_lookahead_bwd,                     \
    .rnn_plan = P##_rnn_plan,                               \
    .rnn_plan_destroy = P##_rnn_plan_destroy,               \
    .rnn_fwd = P##_rnn_fwd,                                 \
    .rnn_bwd = P##_rnn_bwd,                                 \
    .ctc_loss = P##_ctc_loss,                               \
    .argmax = P##_argmax,                                   \
    .loss_total = P##_loss_total,                           \
    .sumsq = P##_sumsq,                                     \
    .sgd_step = P##_sgd_step,                               \
    .adamw_step = P##_adamw_step,                           \
    }

#endif
