/* A trigger's stamp from where the cluster view last changed. The argument for windows: after
 * the view's last change at changed_ms, every GPU's newer samples equal each other (an update
 * that differed would have been a change), so once now - window > changed_ms (plus a second of
 * slack for sample ages) every window from then on holds only equal samples, and its mean stays
 * what it was, until the next change moves the stamp. */
#include "gateway/share.h"

#include "gateway/cluster.h"

#define SHARE_SLACK_MS 1000

uint64_t gwshare_stamp(void *ud, const struct trigger *t) {
  struct cluster *c = ud;
  struct cluster_change ch;
  cluster_changes(c, t->scope == TRIGGER_SCOPE_NODE ? t->node : NULL, &ch);
  if (ch.unsettled)
    return 0; /* an agent came back, left or turned stale since the pass: evaluate now */
  if (t->window_ms > 0 && !t->engine) {
    if (t->window_ms < 3 * ch.max_interval_ms + SHARE_SLACK_MS)
      return 0;
    if (ch.now_ms - t->window_ms - SHARE_SLACK_MS <= ch.changed_ms)
      return 0;
  }
  return ch.stamp ? ch.stamp : 1; /* 0 means "cannot tell": an unchanged view is a real stamp */
}
