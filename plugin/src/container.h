/*
 * container.h - prolog= mode for --tf-dist tasks that pyxis runs in a container.
 *
 * pyxis enters the container in its own task_init: it copies the container's environment
 * (the image's variables and what enroot's hooks add) over the task's, then joins the
 * container's namespaces.  Listed after pyxis in plugstack.conf, tfslurm's task_init
 * therefore runs inside the container, where the hook and its Python are usually absent;
 * listed before it, whatever tfslurm sets is then replaced by the image's values.
 *
 * So, for a step that uses --container-image: task_init_privileged (every plugin's runs
 * before any task_init, in the task's process, still in the host's mount namespace)
 * starts a helper process there, as the job's user.  task_init, listed after pyxis, sends
 * it the task's environment as pyxis left it; the helper runs the hook on the host with
 * `--container`, the step's environment before the container on the hook's stdin, and
 * sends back its output, which task_init applies over the container's values.  When
 * task_init finds itself still in the host's mount namespace although the step asked for
 * a container, tfslurm is listed before pyxis: the task is told so on stderr.
 */
#ifndef TFSLURM_CONTAINER_H
#define TFSLURM_CONTAINER_H

#include <stddef.h>

#include <slurm/spank.h>

/* The argument the hook gets when the helper runs it. */
#define TFD_CONTAINER_ARG "--container"

/* task_init_privileged: start the helper if this step uses a container (0), or leave
 * the task alone (0 too); -1 with a reason in err if the helper could not start. */
int tfd_container_prepare(spank_t sp, const char *path, char *err, size_t errlen);

/* task_init: 1 if a helper was started for this task, else 0. */
int tfd_container_asked(void);

/* task_init: 1 if this task is in another mount namespace than at
 * task_init_privileged (a plugin listed before tfslurm moved it into a container). */
int tfd_container_entered(void);

/* task_init: send this task's environment to the helper and take the hook's output
 * (malloc'd, NUL-terminated) and wait status.  0, or -1 with a reason in err. */
int tfd_container_run(spank_t sp, char **out, size_t *out_len, int *status, char *err,
		      size_t errlen);

/* task_init: stop the helper unused (tfslurm runs the hook itself). */
void tfd_container_release(void);

#endif
