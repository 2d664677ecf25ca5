/* The yolocl commands.  Each takes the arguments after the command name (argv[0] is the command
 * name, as getopt_long expects), handles --help itself, and returns the process exit status:
 * 0 success, 1 failure (the message is printed), 2 bad usage. */
#ifndef YC_COMMANDS_H
#define YC_COMMANDS_H

/* yolocl devices: the CPU device and every OpenCL platform and device. */
int yc_cmd_devices(int argc, char **argv);
/* yolocl info: a model's layer table, parameter count and GFLOPs. */
int yc_cmd_info(int argc, char **argv);
/* yolocl inspect: one forward + loss + backward step written to a safetensors file. */
int yc_cmd_inspect(int argc, char **argv);
/* yolocl bench: inference and training steps timed on a synthetic batch. */
int yc_cmd_bench(int argc, char **argv);
/* yolocl tune: the OpenCL convolution tiles measured for a device and kept for it. */
int yc_cmd_tune(int argc, char **argv);
/* yolocl train: YOLOv5's train.py. */
int yc_cmd_train(int argc, char **argv);
/* yolocl val: YOLOv5's val.py (metrics of weights on a dataset). */
int yc_cmd_val(int argc, char **argv);
/* yolocl detect: YOLOv5's detect.py (annotated images and labels). */
int yc_cmd_detect(int argc, char **argv);
/* yolocl plan: the memory plan of a training run and how it would be fitted. */
int yc_cmd_plan(int argc, char **argv);
/* yolocl export: converts weights (.pt or safetensors) to a yolocl safetensors file. */
int yc_cmd_export(int argc, char **argv);
/* yolocl demo-data: writes the built-in demo dataset. */
int yc_cmd_demo(int argc, char **argv);

#endif
