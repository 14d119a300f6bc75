// What every section of Studio shares: the status line (`say`), the handling of a failed call (`failed`: a
// 401 asks for the admin token, anything else is shown), and the sign-in count (`session`), which each loader
// depends on so that signing in loads everything again without losing unsaved edits.

import { createContext, useContext } from "react";

export interface Feedback {
  say: (text: string, error?: boolean) => void;
  failed: (error: unknown) => void;
  session: number;
}

export const FeedbackContext = createContext<Feedback>({
  say: () => {},
  failed: () => {},
  session: 0,
});

export const useFeedback = () => useContext(FeedbackContext);
