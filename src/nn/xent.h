/* The classification loss of YOLOv5's classify/train.py: torch.nn.CrossEntropyLoss with label
 * smoothing, the mean over the batch, and its gradient with respect to the logits. */
#ifndef YC_XENT_H
#define YC_XENT_H

/* logits: n rows of nc scores; labels: n class indices in [0, nc).  With q the smoothed target
 * (1 - eps + eps/nc for the label, eps/nc elsewhere) and lse_i = log(sum_c exp(z_ic)):
 *   loss = 1/n * sum_i sum_c q_ic * (lse_i - z_ic)
 *   grad_ic = (softmax(z_i)_c - q_ic) / n            (grad may be NULL)
 * computed in double, as torch's float32 result to within a few float roundings.  Returns the
 * loss, or NaN when a label is out of range. */
double yc_xent_loss(const float *logits, const int *labels, int n, int nc, double eps,
                    float *grad);

/* How many of the n rows have their label among the k highest logits (ties: the lower class
 * index ranks first, as torch.topk on CPU) -- classify/val.py's top-1 and top-5 counts. */
int yc_xent_topk_correct(const float *logits, const int *labels, int n, int nc, int k);

#endif
