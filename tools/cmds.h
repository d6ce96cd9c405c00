/* cmds: the CLI's subcommands (each in its own file, using only the public header). */
#ifndef SD_TOOLS_CMDS_H
#define SD_TOOLS_CMDS_H
int cmd_generate(int argc, char **argv);
int cmd_gen_model(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_train_accept(int argc, char **argv); /* SpecDec++: train accept-head */
int cmd_bench(int argc, char **argv);
int cmd_bench_spec(int argc, char **argv);
int cmd_bench_batch(int argc, char **argv);
int cmd_batch(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* tools/serve/ */
int cmd_profile(int argc, char **argv); /* SV */
double cmd_now(void); /* monotonic seconds */
#endif
