/*
 * The pod sandbox's process, like registry.k8s.io/pause: holds the pod's
 * namespaces and does nothing; exits 0 on SIGINT or SIGTERM, and reaps
 * orphans (it is PID 1 of pods that share their process namespace).
 * Built static (gcc -static) for an image FROM scratch.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void bye(int sig)
{
	(void)sig;
	_exit(0);
}

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction quit = { .sa_handler = bye };
	struct sigaction child = { .sa_handler = reap, .sa_flags = SA_NOCLDSTOP };

	sigaction(SIGINT, &quit, NULL);
	sigaction(SIGTERM, &quit, NULL);
	sigaction(SIGCHLD, &child, NULL);
	for (;;)
		pause();
}
